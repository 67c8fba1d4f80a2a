"""Misfire decisions: on time, late with skip, late with run_once, one-shots."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from scheduler.jobs import DelaySchedule, IntervalSchedule, MisfirePolicy, parse_job
from scheduler.planner import effective_misfire_policy, plan_due
from scheduler.schedules import build_schedule

GRACE = timedelta(seconds=60)
DUE = datetime(2026, 4, 1, 10, 0, tzinfo=UTC)
HOURLY = build_schedule(IntervalSchedule(type="interval", seconds=3600), UTC)
ONCE = build_schedule(DelaySchedule(type="delay", seconds=10), UTC)


def test_on_time_runs_the_due_fire_time_and_moves_on() -> None:
    plan = plan_due(HOURLY, DUE, DUE + timedelta(seconds=2), MisfirePolicy.SKIP, GRACE)
    assert (plan.run_at, plan.catch_up, plan.missed_at) == (DUE, False, None)
    assert plan.next_run_at == DUE + timedelta(hours=1)


def test_late_with_skip_records_a_miss_and_jumps_to_the_next_future_fire() -> None:
    now = DUE + timedelta(hours=5, minutes=10)
    plan = plan_due(HOURLY, DUE, now, MisfirePolicy.SKIP, GRACE)
    assert plan.run_at is None
    assert plan.missed_at == DUE
    assert plan.next_run_at == DUE + timedelta(hours=6)


def test_late_with_run_once_runs_the_newest_missed_fire_once() -> None:
    now = DUE + timedelta(hours=5, minutes=10)
    plan = plan_due(HOURLY, DUE, now, MisfirePolicy.RUN_ONCE, GRACE)
    assert (plan.run_at, plan.catch_up, plan.missed_at) == (DUE + timedelta(hours=5), True, None)
    assert plan.next_run_at == DUE + timedelta(hours=6)


def test_one_shot_defaults_to_run_once_and_honours_an_explicit_skip() -> None:
    job = parse_job(
        {
            "id": "once",
            "kind": "outbound_message",
            "schedule": {"type": "delay", "seconds": 10},
            "target": {"channel": "c", "chat_id": "1"},
            "payload": {"text": "x"},
        }
    )
    assert effective_misfire_policy(job, ONCE, MisfirePolicy.SKIP) is MisfirePolicy.RUN_ONCE
    late = DUE + timedelta(days=2)
    plan = plan_due(ONCE, DUE, late, MisfirePolicy.RUN_ONCE, GRACE)
    assert (plan.run_at, plan.catch_up, plan.next_run_at) == (DUE, True, None)
    skipping = job.model_copy(update={"misfire_policy": MisfirePolicy.SKIP})
    assert effective_misfire_policy(skipping, ONCE, MisfirePolicy.RUN_ONCE) is MisfirePolicy.SKIP
    plan = plan_due(ONCE, DUE, late, MisfirePolicy.SKIP, GRACE)
    assert (plan.run_at, plan.missed_at, plan.next_run_at) == (None, DUE, None)
