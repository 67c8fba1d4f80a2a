"""DeadLetterSink: where an inbound event goes when it cannot be parsed or recorded.

Channels reach it through `ChannelRuntime.dead_letter`, the inbound processor
directly (a message the inbox refused alone). Once `record` returns, the event
is durable in the `dead_letters` table (storage/sql/delivery/dead_letters.py), counted in
`picobot_dead_letters_total` and logged (never its payload); the caller then
moves its cursor past the event or answers its platform 200. If `record`
raises, nothing was kept: the caller must not acknowledge.
"""

from __future__ import annotations

import structlog

from gateway.ops.metrics import Metrics
from storage.store import Store

__all__ = ["DeadLetterSink"]

log = structlog.get_logger(__name__)


class DeadLetterSink:
    def __init__(self, store: Store, metrics: Metrics | None = None) -> None:
        self._store = store
        self._metrics = metrics

    async def record(
        self, channel: str, platform_id: str | None, payload: str | bytes, reason: str
    ) -> int:
        letter_id = await self._store.record_dead_letter(channel, platform_id, payload, reason)
        if self._metrics is not None:
            self._metrics.dead_letter(channel)
        log.warning(
            "inbound_dead_lettered",
            channel=channel,
            platform_id=platform_id,
            reason=reason[:200],
            dead_letter=letter_id,
        )
        return letter_id
