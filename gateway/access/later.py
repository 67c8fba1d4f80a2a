"""Messages over their sender's rate kept for later (`limits.over_rate:
"later"`, docs/limits.md#rate-limits).

The access gate hands such a message here with the moment its sender has
room again; its inbox row stays open. When that moment comes by the
gateway's clock, `release` takes it back through the gate (it takes a place
in the rate then, or waits again) and on to its session. A sender's later
messages wait behind their earlier ones, so each chat keeps its order.

Bounded: at most `per_sender` messages a sender and `total` in all wait here;
past that the gate refuses with a reply, as in "refuse" mode. Nothing is
lost across a restart: the rows are open in the inbox, and recovery judges
them again.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime

import structlog

from gateway.access.policy import Verdict
from gateway.lifecycle import cancel_and_wait
from gateway.work import WorkItem

__all__ = ["Held", "LaterMessages"]

log = structlog.get_logger(__name__)

Release = Callable[["Held"], Awaitable[None]]


@dataclass(order=True, slots=True)
class Held:
    due: datetime
    seq: int
    item: WorkItem = field(compare=False)
    verdict: Verdict = field(compare=False)

    @property
    def sender(self) -> tuple[str, str]:
        return self.item.message.channel, self.item.message.sender_id


class LaterMessages:
    """A `Service` (gateway.lifecycle): one task releases messages as they fall due."""

    name = "rate-limited messages"

    def __init__(self, clock: Callable[[], datetime], per_sender: int, total: int = 1000) -> None:
        self.clock = clock
        self.per_sender = per_sender
        self.total = total
        self.release: Release | None = None  # set by the inbound processor
        self._heap: list[Held] = []
        self._senders: Counter[tuple[str, str]] = Counter()
        self._seq = itertools.count()
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def __len__(self) -> int:
        return len(self._heap)

    def waiting(self, sender: tuple[str, str]) -> datetime | None:
        """When the last of `sender`'s waiting messages falls due; None: none waits."""
        if not self._senders[sender]:
            return None
        return max(h.due for h in self._heap if h.sender == sender)

    def hold(self, item: WorkItem, verdict: Verdict, due: datetime) -> bool:
        """Keep `item` until `due`; False when its sender, or everyone, has as
        many waiting as allowed (the caller refuses it instead)."""
        m = item.message
        sender = (m.channel, m.sender_id)
        if self._senders[sender] >= self.per_sender or len(self._heap) >= self.total:
            return False
        self._senders[sender] += 1
        heapq.heappush(self._heap, Held(due, next(self._seq), item, verdict))
        self._changed.set()
        return True

    def wake(self) -> None:
        """Read the clock again (it may have moved: tests shift it)."""
        self._changed.set()

    async def start(self, tg: asyncio.TaskGroup) -> None:
        self._task = tg.create_task(self._run(), name="rate-limited-messages")

    async def stop(self) -> None:
        """What still waits stays open in the inbox: the next start takes it up."""
        if self._task is not None:
            await cancel_and_wait([self._task])

    async def _run(self) -> None:
        while True:
            self._changed.clear()
            if not self._heap:
                await self._changed.wait()
                continue
            wait = (self._heap[0].due - self.clock()).total_seconds()
            if wait > 0:
                try:
                    async with asyncio.timeout(wait):
                        await self._changed.wait()
                except TimeoutError:
                    pass
                continue
            held = heapq.heappop(self._heap)
            self._senders[held.sender] -= 1
            if not self._senders[held.sender]:
                del self._senders[held.sender]
            await self._release(held)

    async def _release(self, held: Held) -> None:
        assert self.release is not None, "no inbound processor to release to"
        try:
            await self.release(held)
        except asyncio.CancelledError:
            raise
        except Exception:  # the row stays open in the inbox: the next start takes it up
            log.exception("rate_later_release_failed", channel=held.item.message.channel)
