"""The "typing…" indicator while a turn runs: getconfig → typing_ticket, sendtyping.

One task per chat, started on WORKING and stopped on IDLE: status 1 now and
every `interval` seconds (the plugin's cadence), status 2 when the turn ends.
A ticket is kept for `ticket_ttl` seconds, then fetched anew (tickets expire
on the server; the getconfig that fetches one also refreshes the context token).
Best effort: failures are logged and swallowed, never raised to the gateway.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

import structlog

from channels.wechat.api import ILinkClient, ILinkError
from channels.wechat.contexts import ContextTokens

__all__ = ["TypingIndicator"]

log = structlog.get_logger("picobot.channels.wechat")

_STOP_TIMEOUT_SECS = 5.0


class TypingIndicator:
    def __init__(
        self,
        client: ILinkClient,
        contexts: ContextTokens,
        interval: float,
        *,
        ticket_ttl: float = 300.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._client = client
        self._contexts = contexts
        self._interval = interval
        self._ticket_ttl = ticket_ttl
        self._clock = clock
        self._tickets: dict[str, tuple[str, float]] = {}  # user → (ticket, obtained at)
        self._tasks: dict[str, tuple[asyncio.Task[None], asyncio.Event]] = {}

    def start(self, user_id: str) -> None:
        running = self._tasks.get(user_id)
        if running is not None and not running[0].done():
            return
        stop = asyncio.Event()
        task = asyncio.create_task(self._run(user_id, stop), name=f"wechat-typing-{user_id}")
        self._tasks[user_id] = (task, stop)

    async def stop(self, user_id: str) -> None:
        entry = self._tasks.pop(user_id, None)
        if entry is None:
            return
        task, stop = entry
        stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), _STOP_TIMEOUT_SECS)
        except TimeoutError:
            task.cancel()
            await asyncio.wait([task])

    async def close(self) -> None:
        """Cancel every loop (channel stop): no goodbye requests."""
        entries = list(self._tasks.values())
        self._tasks.clear()
        for task, _ in entries:
            task.cancel()
        if entries:
            await asyncio.wait([task for task, _ in entries])

    async def _ticket(self, user_id: str) -> str | None:
        kept = self._tickets.get(user_id)
        if kept is not None and self._clock() - kept[1] < self._ticket_ttl:
            return kept[0]
        ticket = (await self._contexts.config(self._client, user_id)).typing_ticket
        if ticket:
            self._tickets[user_id] = (ticket, self._clock())
        else:
            self._tickets.pop(user_id, None)
        return ticket

    async def _run(self, user_id: str, stop: asyncio.Event) -> None:
        try:
            ticket = await self._ticket(user_id)
            while ticket and not stop.is_set():
                await self._client.send_typing(user_id, ticket, typing=True)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self._interval)
                ticket = await self._ticket(user_id)  # a new one once the TTL is over
            if ticket:
                await self._client.send_typing(user_id, ticket, typing=False)
        except (ILinkError, TimeoutError) as exc:
            self._tickets.pop(user_id, None)  # it may have expired: fetch anew next time
            log.info("wechat typing indicator failed", channel="wechat", error=str(exc))
