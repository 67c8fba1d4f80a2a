"""Fire-time arithmetic for the four schedule types (delay, interval, at, cron).

Every function takes and returns aware datetimes (UTC out). Cron expressions
are evaluated on the wall clock of the job's zone, with these DST rules:

- spring forward: a time inside the skipped hour fires once, at the first
  instant after the jump (02:30 on a 02:00→03:00 day fires at 03:00);
- fall back: a time inside the repeated hour fires once (at its first
  occurrence) when the hour field is fixed (`30 2 * * *`); when the hour field
  is a wildcard (`*/15 * * * *`, `0 * * * *`) it follows elapsed time and fires
  in both passes, like cronie.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Protocol
from zoneinfo import ZoneInfo

from croniter import croniter

from scheduler.jobs import AtSchedule, CronSchedule, DelaySchedule, IntervalSchedule, ScheduleSpec

__all__ = ["Schedule", "build_schedule"]

# A cron search that finds nothing in this many candidates is a bug or an
# expression like "0 0 30 2 *" that never fires.
_MAX_CANDIDATES = 10_000


class Schedule(Protocol):
    @property
    def one_shot(self) -> bool: ...

    def first_fire(self, now: datetime) -> datetime:
        """The first fire time of a job created (or whose schedule changed) at `now`."""
        ...

    def next_after(self, moment: datetime) -> datetime | None:
        """The first fire time strictly after `moment`; None for one-shot schedules."""
        ...

    def latest_at_or_before(self, due: datetime, now: datetime) -> datetime:
        """The newest fire time in [due, now], where `due` is itself a fire time <= now."""
        ...


def _utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        raise ValueError("naive datetime")
    return moment.astimezone(UTC)


@dataclass(frozen=True, slots=True)
class _Delay:
    seconds: float
    one_shot: bool = True

    def first_fire(self, now: datetime) -> datetime:
        return _utc(now) + timedelta(seconds=self.seconds)

    def next_after(self, moment: datetime) -> datetime | None:
        return None

    def latest_at_or_before(self, due: datetime, now: datetime) -> datetime:
        return _utc(due)


@dataclass(frozen=True, slots=True)
class _At:
    at: datetime
    one_shot: bool = True

    def first_fire(self, now: datetime) -> datetime:
        return self.at

    def next_after(self, moment: datetime) -> datetime | None:
        return None

    def latest_at_or_before(self, due: datetime, now: datetime) -> datetime:
        return _utc(due)


@dataclass(frozen=True, slots=True)
class _Interval:
    """Fires on the grid due, due + s, due + 2s, … anchored at the first fire time."""

    seconds: float
    one_shot: bool = False

    def first_fire(self, now: datetime) -> datetime:
        return _utc(now) + timedelta(seconds=self.seconds)

    def next_after(self, moment: datetime) -> datetime | None:
        return _utc(moment) + timedelta(seconds=self.seconds)

    def latest_at_or_before(self, due: datetime, now: datetime) -> datetime:
        due = _utc(due)
        steps = math.floor((_utc(now) - due).total_seconds() / self.seconds)
        return due + timedelta(seconds=self.seconds * max(steps, 0))


def _is_repeat(local: datetime) -> bool:
    """True for the second occurrence of a wall time that a fall-back repeats."""
    return local.fold == 1 and local.replace(fold=0).utcoffset() != local.utcoffset()


@dataclass(frozen=True, slots=True)
class _Cron:
    expression: str
    zone: tzinfo
    one_shot: bool = False

    @property
    def _fixed_hour(self) -> bool:
        return not self.expression.split()[1].startswith("*")

    def _accept(self, candidate: datetime) -> bool:
        return not (self._fixed_hour and _is_repeat(candidate.astimezone(self.zone)))

    def first_fire(self, now: datetime) -> datetime:
        fire = self.next_after(now)
        if fire is None:
            raise ValueError(f"cron expression {self.expression!r} never fires")
        return fire

    def next_after(self, moment: datetime) -> datetime | None:
        it = croniter(self.expression, _utc(moment).astimezone(self.zone))
        for _ in range(_MAX_CANDIDATES):
            candidate: datetime = it.get_next(datetime)
            if candidate > moment and self._accept(candidate):
                return _utc(candidate)
        return None

    def latest_at_or_before(self, due: datetime, now: datetime) -> datetime:
        # croniter's get_prev is strictly before its start; a second later
        # includes a fire time exactly at `now` (cron has minute resolution).
        start = _utc(now) + timedelta(seconds=1)
        it = croniter(self.expression, start.astimezone(self.zone))
        for _ in range(_MAX_CANDIDATES):
            candidate: datetime = it.get_prev(datetime)
            if candidate <= due:
                break
            if candidate <= now and self._accept(candidate):
                return _utc(candidate)
        return _utc(due)


def build_schedule(spec: ScheduleSpec, default_zone: tzinfo) -> Schedule:
    """The arithmetic for `spec`; zone-less times and cron use `default_zone`."""
    match spec:
        case DelaySchedule(seconds=seconds):
            return _Delay(seconds)
        case IntervalSchedule(seconds=seconds):
            return _Interval(seconds)
        case AtSchedule(at=at, timezone=zone_name):
            zone = ZoneInfo(zone_name) if zone_name else default_zone
            return _At(_utc(at if at.tzinfo is not None else at.replace(tzinfo=zone)))
        case CronSchedule(expression=expression, timezone=zone_name):
            return _Cron(expression, ZoneInfo(zone_name) if zone_name else default_zone)
    raise TypeError(f"unknown schedule {spec!r}")
