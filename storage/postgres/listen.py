"""LISTEN on a connection of its own, in the event loop (docs/scale-out.md).

The backend's one connection lives in its worker thread and runs whole
transactions; notifications need a connection that waits for them, so this is
a second one, psycopg's asyncio connection, autocommit, doing nothing but
LISTEN. It reconnects after a loss (backing off up to 5 s) and calls
`on_listening` after every (re)connect: notifications sent meanwhile are lost,
so the caller looks at the database for what it may have missed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Final

import psycopg
import structlog

from storage.url import redact_url

__all__ = ["listen"]

log = structlog.get_logger(__name__)

_MAX_BACKOFF: Final = 5.0


async def listen(
    url: str,
    channel: str,
    on_payload: Callable[[str], None],
    on_listening: Callable[[], None],
) -> None:
    """Until cancelled: every notification's payload on `channel`, in order."""
    backoff = 0.2
    while True:
        try:
            conn = await psycopg.AsyncConnection.connect(
                url, autocommit=True, application_name="picobot-listen", connect_timeout=10
            )
        except psycopg.Error as exc:
            log.warning("listen_connect_failed", url=redact_url(url), error=type(exc).__name__)
            await asyncio.sleep(backoff)
            backoff = min(_MAX_BACKOFF, backoff * 2)
            continue
        try:
            async with conn:
                await conn.execute(f'LISTEN "{channel}"')
                backoff = 0.2
                on_listening()
                async for notify in conn.notifies():
                    on_payload(notify.payload)
        except psycopg.Error as exc:
            log.warning("listen_lost", error=type(exc).__name__)
            await asyncio.sleep(backoff)
            backoff = min(_MAX_BACKOFF, backoff * 2)
