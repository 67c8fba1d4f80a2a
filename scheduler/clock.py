"""The scheduler's notion of time, injectable so tests never wait for real.

`SystemClock` reads the wall clock (UTC) and sleeps on the event loop.
`ManualClock` only moves when told to (`advance`, `set`); a sleeper wakes when
the clock passes its deadline, and `wait_sleeping` lets a test wait until the
engine has finished reacting and gone back to sleep.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

__all__ = ["Clock", "ManualClock", "SystemClock"]


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, aware, UTC."""
        ...

    async def sleep_until(self, deadline: datetime | None, wake: asyncio.Event) -> None:
        """Return when `deadline` has passed (never if None) or `wake` is set."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep_until(self, deadline: datetime | None, wake: asyncio.Event) -> None:
        if deadline is None:
            await wake.wait()
            return
        delay = (deadline - self.now()).total_seconds()
        if delay <= 0:
            return
        try:
            async with asyncio.timeout(delay):
                await wake.wait()
        except TimeoutError:
            return


@dataclass(slots=True)
class _Sleeper:
    deadline: datetime | None
    wake: asyncio.Event


class ManualClock:
    """A clock for tests: time stands still until `advance` or `set`."""

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("ManualClock needs an aware start time")
        self._now = start.astimezone(UTC)
        self._sleepers: list[_Sleeper] = []
        self._parked = asyncio.Event()

    def now(self) -> datetime:
        return self._now

    async def sleep_until(self, deadline: datetime | None, wake: asyncio.Event) -> None:
        if deadline is not None and deadline <= self._now:
            return
        sleeper = _Sleeper(deadline, wake)
        self._sleepers.append(sleeper)
        self._parked.set()
        try:
            await wake.wait()
        finally:
            self._sleepers.remove(sleeper)

    def advance(self, seconds: float = 0, **delta: float) -> None:
        self.set(self._now + timedelta(seconds=seconds, **delta))

    def set(self, moment: datetime) -> None:
        if moment.tzinfo is None:
            raise ValueError("naive datetime")
        self._now = moment.astimezone(UTC)
        for sleeper in self._sleepers:
            if sleeper.deadline is not None and sleeper.deadline <= self._now:
                sleeper.wake.set()

    def sleeping(self) -> int:
        """How many sleepers are parked and not yet woken."""
        return sum(1 for s in self._sleepers if not s.wake.is_set())

    async def wait_sleeping(self, count: int = 1) -> None:
        """Wait until `count` sleepers are parked (the engines reacted and sleep again)."""
        while self.sleeping() < count:
            self._parked.clear()
            await self._parked.wait()
