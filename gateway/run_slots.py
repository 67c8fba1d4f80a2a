"""`RunSlots`: the gateway's run cap (`gateway.max_concurrent_runs`), shared by
turns and the sub-agents they run (docs/subagents.md, Limits).

A turn holds one slot while it runs (gateway.sessions). A sub-agent holds one
too, but a turn's first running child *borrows its parent's slot* instead of
taking a new one: the parent is only waiting for its tool results, and a
child that needed a second slot while its parent held the last one would wait
for itself (a cap of 1 could never run a `task`). Its other children running
at the same time take free slots; a child that finds neither waits — for a
sibling to hand the parent's slot back or for any run to end — at most
`wait_secs` (`NoRunSlot`), so a turn never hangs on it. At most `child_limit`
children (`subagents.max_concurrent`) run at once across the gateway; both
limits are checked in one step, so a child never holds one while it waits
for the other.

Which turn a child belongs to travels in a context variable: the turn's task,
and the tool tasks it starts, inherit it, so agent/ never sees a slot.
A child outside any turn (none today) takes a free slot like any other.
Waiting is cancellable (`/stop`); releasing never awaits, so a cancelled run
always gives its slot back.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass

__all__ = ["NoRunSlot", "RunSlots"]


class NoRunSlot(Exception):
    """No slot for a sub-agent within its wait."""

    def __init__(self, wait_secs: float) -> None:
        super().__init__(f"no run slot within {wait_secs:g}s")
        self.wait_secs = wait_secs


@dataclass(slots=True)
class _TurnSlot:
    lent: bool = False  # a child of this turn runs in it


_TURN: ContextVar[_TurnSlot | None] = ContextVar("picobot_turn_slot", default=None)


class RunSlots:
    def __init__(self, limit: int, child_limit: int) -> None:
        self.limit = limit
        self.child_limit = child_limit
        self._taken = 0  # slots held by turns and by children that did not borrow
        self._children = 0
        # one future per waiter; every release wakes them all to re-check (in
        # arrival order, so the order they wait in is kept)
        self._waiters: dict[asyncio.Future[None], None] = {}

    @property
    def free(self) -> int:
        return self.limit - self._taken

    @property
    def children(self) -> int:
        return self._children

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Hold a slot for a turn; tasks created inside belong to it."""
        await self._wait(lambda: self._taken < self.limit)
        self._taken += 1
        token = _TURN.set(_TurnSlot())
        try:
            yield
        finally:
            _TURN.reset(token)
            self._taken -= 1
            self._wake()

    @asynccontextmanager
    async def child(self, wait_secs: float) -> AsyncIterator[None]:
        """Hold a slot for a sub-agent of the current turn: its parent's if
        free, else a free one; `NoRunSlot` after `wait_secs` without either."""
        parent = _TURN.get()

        def borrowable() -> bool:
            return parent is not None and not parent.lent

        def ready() -> bool:
            return self._children < self.child_limit and (borrowable() or self._taken < self.limit)

        try:
            async with asyncio.timeout(wait_secs):
                await self._wait(ready)
        except TimeoutError:
            raise NoRunSlot(wait_secs) from None
        borrowed = borrowable()
        if borrowed:
            assert parent is not None
            parent.lent = True
        else:
            self._taken += 1
        self._children += 1
        try:
            yield
        finally:
            self._children -= 1
            if borrowed:
                assert parent is not None
                parent.lent = False
            else:
                self._taken -= 1
            self._wake()

    async def _wait(self, ready: Callable[[], bool]) -> None:
        loop = asyncio.get_running_loop()
        while not ready():
            woken: asyncio.Future[None] = loop.create_future()
            self._waiters[woken] = None
            try:
                await woken
            finally:
                self._waiters.pop(woken, None)

    def _wake(self) -> None:
        for woken in self._waiters:
            if not woken.done():
                woken.set_result(None)
