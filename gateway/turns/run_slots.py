"""`RunSlots`: the gateway's run cap (`gateway.max_concurrent_runs`), shared by
turns and the sub-agents they run (docs/subagents.md, Limits).

A turn holds one slot while it runs (gateway.sessions.manager). A sub-agent holds one
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
A freed slot is handed to the first waiter it fits, in arrival order, before
whoever freed it can ask again: a chat that keeps its queue full cannot take
its slot back ahead of the chats waiting for one. Waiting is cancellable
(`/stop`); releasing never awaits, so a cancelled run always gives its slot
back, and a slot handed to a waiter cancelled meanwhile goes on to the next.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

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


@dataclass(slots=True)
class _Claim:
    """A run asking for a slot: a turn, or a child (of `parent`'s turn, if any)."""

    child: bool
    parent: _TurnSlot | None = None
    granted: asyncio.Future[bool] | None = None  # set while it waits: True = borrowed
    borrowed: bool = field(default=False)


class RunSlots:
    def __init__(self, limit: int, child_limit: int) -> None:
        self.limit = limit
        self.child_limit = child_limit
        self._taken = 0  # slots held by turns and by children that did not borrow
        self._children = 0
        # claims that did not fit when they came, oldest first (one per waiting run)
        self._queue: deque[_Claim] = deque()

    @property
    def free(self) -> int:
        return self.limit - self._taken

    @property
    def children(self) -> int:
        return self._children

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Hold a slot for a turn; tasks created inside belong to it."""
        claim = _Claim(child=False)
        await self._acquire(claim)
        token = _TURN.set(_TurnSlot())
        try:
            yield
        finally:
            _TURN.reset(token)
            self._release(claim)

    @asynccontextmanager
    async def child(self, wait_secs: float) -> AsyncIterator[None]:
        """Hold a slot for a sub-agent of the current turn: its parent's if
        free, else a free one; `NoRunSlot` after `wait_secs` without either."""
        claim = _Claim(child=True, parent=_TURN.get())
        try:
            async with asyncio.timeout(wait_secs):
                await self._acquire(claim)
        except TimeoutError:
            raise NoRunSlot(wait_secs) from None
        try:
            yield
        finally:
            self._release(claim)

    def _fit(self, claim: _Claim) -> bool | None:
        """None if `claim` cannot run now; else whether it borrows its parent's slot."""
        if claim.child:
            if self._children >= self.child_limit:
                return None
            if claim.parent is not None and not claim.parent.lent:
                return True
        return False if self._taken < self.limit else None

    def _take(self, claim: _Claim, borrowed: bool) -> None:
        claim.borrowed = borrowed
        if claim.child:
            self._children += 1
        if borrowed:
            assert claim.parent is not None
            claim.parent.lent = True
        else:
            self._taken += 1

    def _release(self, claim: _Claim) -> None:
        if claim.child:
            self._children -= 1
        if claim.borrowed:
            assert claim.parent is not None
            claim.parent.lent = False
        else:
            self._taken -= 1
        self._hand_over()

    def _hand_over(self) -> None:
        """Give what is free to the waiting claims it fits, oldest first."""
        for claim in list(self._queue):
            assert claim.granted is not None
            if claim.granted.done():
                continue  # cancelled, or timed out, but not yet run: it leaves on its own
            fit = self._fit(claim)
            if fit is None:
                continue
            self._queue.remove(claim)
            self._take(claim, fit)
            claim.granted.set_result(fit)

    async def _acquire(self, claim: _Claim) -> None:
        fit = self._fit(claim)
        if fit is not None:  # what waits does not fit, or it would have been handed it
            self._take(claim, fit)
            return
        claim.granted = asyncio.get_running_loop().create_future()
        self._queue.append(claim)
        try:
            await claim.granted
        except BaseException:  # cancelled (or timed out) while waiting
            if claim.granted.done() and not claim.granted.cancelled():
                self._release(claim)  # handed a slot meanwhile: on to the next
            else:
                self._queue.remove(claim)  # never handed one: still queued
            raise
