"""Fire-time arithmetic of every schedule type, including DST transitions."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from scheduler.jobs import AtSchedule, CronSchedule, DelaySchedule, IntervalSchedule
from scheduler.schedules import Schedule, build_schedule

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")


def cron(expression: str, zone: str | None = None, default: ZoneInfo = BERLIN) -> Schedule:
    return build_schedule(CronSchedule(type="cron", expression=expression, timezone=zone), default)


def fires(schedule: Schedule, start: datetime, count: int) -> list[datetime]:
    out: list[datetime] = []
    moment = start
    for _ in range(count):
        nxt = schedule.next_after(moment)
        assert nxt is not None
        out.append(nxt)
        moment = nxt
    return out


def local(moments: list[datetime], zone: ZoneInfo) -> list[str]:
    return [m.astimezone(zone).strftime("%m-%d %H:%M %Z") for m in moments]


def test_delay_fires_once_after_creation() -> None:
    schedule = build_schedule(DelaySchedule(type="delay", seconds=90), UTC)
    created = datetime(2026, 1, 1, 8, 0, tzinfo=UTC)
    assert schedule.one_shot
    assert schedule.first_fire(created) == created + timedelta(seconds=90)
    assert schedule.next_after(created + timedelta(seconds=90)) is None


def test_a_leap_day_is_a_date_that_exists() -> None:
    """A day only some years have is valid, and fires in those years (a day
    no month it names has is refused where the job is parsed: test_jobs)."""
    got = fires(cron("0 9 29 2 *", "UTC"), datetime(2026, 3, 1, tzinfo=UTC), 2)
    assert got == [datetime(2028, 2, 29, 9, tzinfo=UTC), datetime(2032, 2, 29, 9, tzinfo=UTC)]


def test_interval_keeps_its_grid() -> None:
    schedule = build_schedule(IntervalSchedule(type="interval", seconds=300), UTC)
    created = datetime(2026, 1, 1, 8, 0, tzinfo=UTC)
    first = schedule.first_fire(created)
    assert first == created + timedelta(minutes=5)
    assert schedule.next_after(first) == created + timedelta(minutes=10)
    # 17 minutes after the first fire time the newest grid point is at +15.
    latest = schedule.latest_at_or_before(first, first + timedelta(minutes=17))
    assert latest == first + timedelta(minutes=15)


def test_at_reads_a_time_without_offset_in_the_job_zone() -> None:
    naive = AtSchedule(type="at", at=datetime(2026, 7, 1, 9, 0), timezone="Asia/Shanghai")
    assert build_schedule(naive, UTC).first_fire(datetime(2026, 1, 1, tzinfo=UTC)) == datetime(
        2026, 7, 1, 1, 0, tzinfo=UTC
    )
    default_zone = AtSchedule(type="at", at=datetime(2026, 7, 1, 9, 0))
    assert build_schedule(default_zone, BERLIN).first_fire(
        datetime(2026, 1, 1, tzinfo=UTC)
    ) == datetime(2026, 7, 1, 7, 0, tzinfo=UTC)
    absolute = AtSchedule.model_validate({"type": "at", "at": "2026-07-01T09:00:00+02:00"})
    assert build_schedule(absolute, NEW_YORK).first_fire(
        datetime(2026, 1, 1, tzinfo=UTC)
    ) == datetime(2026, 7, 1, 7, 0, tzinfo=UTC)


def test_daily_0900_stays_at_0900_local_across_spring_forward() -> None:
    schedule = cron("0 9 * * *")
    got = fires(schedule, datetime(2026, 3, 27, 12, 0, tzinfo=UTC), 4)
    assert local(got, BERLIN) == [
        "03-28 09:00 CET",
        "03-29 09:00 CEST",
        "03-30 09:00 CEST",
        "03-31 09:00 CEST",
    ]
    # The UTC instant moves by the hour the clocks moved.
    assert [g.hour for g in got] == [8, 7, 7, 7]


def test_daily_0900_stays_at_0900_local_across_fall_back_in_new_york() -> None:
    got = fires(cron("0 9 * * *", "America/New_York"), datetime(2026, 10, 31, 18, tzinfo=UTC), 3)
    assert local(got, NEW_YORK) == ["11-01 09:00 EST", "11-02 09:00 EST", "11-03 09:00 EST"]
    assert got[0] - datetime(2026, 10, 31, 13, tzinfo=UTC) == timedelta(hours=25)


@pytest.mark.parametrize(
    ("zone", "start", "expected"),
    [
        # Berlin skips 02:00-03:00 on 2026-03-29; New York on 2026-03-08.
        ("Europe/Berlin", datetime(2026, 3, 28, 12, tzinfo=UTC), "03-29 03:00 CEST"),
        ("America/New_York", datetime(2026, 3, 7, 12, tzinfo=UTC), "03-08 03:00 EDT"),
    ],
)
def test_0230_on_spring_forward_day_fires_once_right_after_the_jump(
    zone: str, start: datetime, expected: str
) -> None:
    tz = ZoneInfo(zone)
    got = fires(cron("30 2 * * *", zone), start, 3)
    jump = datetime.strptime(f"{start.year}-{expected[:5]}", "%Y-%m-%d")  # no year: 3.13 warns
    day_after = (jump + timedelta(days=1)).strftime("%m-%d")
    assert local(got, tz)[0] == expected
    assert local(got, tz)[1].startswith(f"{day_after} 02:30")
    assert got[1] - got[0] == timedelta(hours=23, minutes=30)


def test_two_times_inside_the_gap_do_not_fire_twice() -> None:
    got = fires(cron("0,30 2 * * *"), datetime(2026, 3, 28, 12, tzinfo=UTC), 3)
    assert local(got, BERLIN) == ["03-29 03:00 CEST", "03-30 02:00 CEST", "03-30 02:30 CEST"]


def test_fixed_hour_fires_once_on_fall_back_day() -> None:
    # 2026-10-25: Berlin repeats 02:00-03:00.
    got = fires(cron("30 2 * * *"), datetime(2026, 10, 24, 12, tzinfo=UTC), 3)
    assert local(got, BERLIN) == ["10-25 02:30 CEST", "10-26 02:30 CET", "10-27 02:30 CET"]


def test_wildcard_hour_follows_elapsed_time_through_fall_back() -> None:
    got = fires(cron("0 * * * *"), datetime(2026, 10, 24, 23, 30, tzinfo=UTC), 4)
    # From 01:30 CEST: one fire per real hour, 02:00 twice (once per pass).
    assert [b - a for a, b in itertools.pairwise(got)] == [timedelta(hours=1)] * 3
    assert local(got, BERLIN) == [
        "10-25 02:00 CEST",
        "10-25 02:00 CET",
        "10-25 03:00 CET",
        "10-25 04:00 CET",
    ]


def test_cron_without_zone_uses_the_default_zone() -> None:
    start = datetime(2026, 6, 1, 0, 0, tzinfo=UTC)
    shanghai = cron("0 9 * * *", default=ZoneInfo("Asia/Shanghai"))
    assert shanghai.first_fire(start) == datetime(2026, 6, 1, 1, 0, tzinfo=UTC)
    explicit = cron("0 9 * * *", "UTC", default=ZoneInfo("Asia/Shanghai"))
    assert explicit.first_fire(start) == datetime(2026, 6, 1, 9, 0, tzinfo=UTC)


def test_cron_latest_fire_time_at_or_before_now() -> None:
    schedule = cron("0 9 * * *", "UTC")
    due = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
    now = datetime(2026, 5, 4, 10, 30, tzinfo=UTC)
    assert schedule.latest_at_or_before(due, now) == datetime(2026, 5, 4, 9, 0, tzinfo=UTC)
    exactly = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)
    assert schedule.latest_at_or_before(due, exactly) == exactly
    assert schedule.latest_at_or_before(due, due + timedelta(hours=1)) == due
