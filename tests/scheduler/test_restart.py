"""Restarts and concurrency: misfire policies, one-shots missed while down, no double runs."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from scheduler.events import EventRegistry, InternalEvent
from scheduler.service import Scheduler
from storage.sql.jobs import RunCause, RunStatus, insert_run, list_jobs, to_db_time
from tests.scheduler.conftest import AS_ADMIN, START, Harness, interval_job, statuses


async def restart(
    harness: Harness, scheduler: Scheduler, down_secs: float, **kw: object
) -> Scheduler:
    """Stop `scheduler`, let time pass while nothing runs, start a new one on the same DB."""
    jobs = [j.definition() for j in scheduler.config.jobs]
    await scheduler.stop()
    harness.clock.advance(down_secs)
    settings = {"misfire_policy": scheduler.config.misfire_policy.value, **kw}
    return await harness.start(jobs, **settings)  # type: ignore[arg-type]


async def test_skip_policy_records_one_miss_and_keeps_the_grid(harness: Harness) -> None:
    first = await harness.start([interval_job(seconds=60)])
    await harness.tick(60)
    await restart(harness, first, 3600)  # down for an hour: 60 fire times passed
    assert len(harness.host.sent) == 1
    runs = await harness.runs("tick")
    assert statuses(runs) == ["succeeded", "missed"]
    assert runs[1].scheduled_at == START + timedelta(seconds=120)
    await harness.tick(59)
    assert len(harness.host.sent) == 1
    await harness.tick(1)  # back on the original grid: START + 3720s
    assert len(harness.host.sent) == 2
    assert (await harness.runs("tick"))[-1].scheduled_at == START + timedelta(seconds=3720)


async def test_run_once_policy_catches_up_exactly_once(harness: Harness) -> None:
    first = await harness.start([interval_job(seconds=60)], misfire_policy="run_once")
    await harness.tick(60)
    await restart(harness, first, 3600)
    assert len(harness.host.sent) == 2  # one regular run, one catch-up for the whole outage
    runs = await harness.runs("tick")
    assert statuses(runs) == ["succeeded", "succeeded"]
    assert runs[1].cause is RunCause.CATCH_UP
    assert runs[1].scheduled_at == START + timedelta(seconds=3660)  # the newest missed time
    await harness.tick(59)
    assert len(harness.host.sent) == 2


async def test_a_one_shot_missed_while_down_fires_once_at_start_up(harness: Harness) -> None:
    once = {**interval_job("once"), "schedule": {"type": "delay", "seconds": 60}}
    first = await harness.start([once])
    second = await restart(harness, first, 600)
    assert harness.host.sent == [("telegram", "42", "ping from once")]
    [run] = await harness.runs("once")
    assert (run.status, run.cause) == (RunStatus.SUCCEEDED, RunCause.CATCH_UP)
    await restart(harness, second, 600)  # the same config again: already done
    assert len(harness.host.sent) == 1


async def test_an_unchanged_config_job_keeps_its_timing_across_a_short_restart(
    harness: Harness,
) -> None:
    first = await harness.start([interval_job(seconds=60)])
    await harness.tick(60)
    await restart(harness, first, 30)  # at +90s; the next fire time stays +120s
    await harness.tick(29)
    assert len(harness.host.sent) == 1
    await harness.tick(1)
    assert len(harness.host.sent) == 2
    assert statuses(await harness.runs("tick")) == ["succeeded", "succeeded"]


async def test_a_changed_schedule_restarts_the_timing_and_a_removed_job_is_deleted(
    harness: Harness,
) -> None:
    first = await harness.start([interval_job("a", seconds=60), interval_job("b", seconds=60)])
    await first.stop()
    second = await harness.start([interval_job("a", seconds=600)])
    jobs = await second.db.read(list_jobs)
    assert [(j.id, j.next_run_at) for j in jobs] == [("a", START + timedelta(seconds=600))]


async def test_a_run_left_unfinished_by_a_crash_is_marked_interrupted_not_rerun(
    harness: Harness,
) -> None:
    first = await harness.start([interval_job(seconds=60)])
    await first.stop()
    db = first.db
    # What a process killed mid-run leaves behind: a claimed run, next_run_at advanced.
    due = START + timedelta(seconds=60)
    await db.write(lambda c: insert_run(c, "tick", due, RunCause.SCHEDULE, RunStatus.CLAIMED, due))
    await db.write(
        lambda c: c.execute(
            "UPDATE scheduler_jobs SET next_run_at = ?",
            (to_db_time(due + timedelta(seconds=60)),),
        )
    )
    harness.clock.advance(70)
    await harness.start([interval_job(seconds=60)])
    assert harness.host.sent == []
    [run] = await harness.runs("tick")
    assert run.status is RunStatus.INTERRUPTED
    await harness.tick(50)
    assert len(harness.host.sent) == 1


async def test_two_schedulers_on_one_database_run_each_fire_time_once(harness: Harness) -> None:
    jobs = [interval_job("a", seconds=60), interval_job("b", seconds=90)]
    db_one = await harness.open_db()
    await harness.start(jobs, db=db_one)
    db_two = await harness.open_db()
    await harness.start(jobs, db=db_two)
    for _ in range(6):  # both engines wake at the same instants and race for the claims
        await harness.tick(30)
    assert (
        sorted(text for _, _, text in harness.host.sent)
        == ["ping from a"] * 3 + ["ping from b"] * 2
    )
    assert statuses(await harness.runs("a")) == ["succeeded"] * 3
    assert statuses(await harness.runs("b")) == ["succeeded"] * 2


async def test_stop_marks_the_run_it_abandons_interrupted(harness: Harness) -> None:
    harness.host.hold = asyncio.Event()
    job = {
        "id": "slow",
        "kind": "agent_task",
        "schedule": {"type": "interval", "seconds": 60},
        "target": {"channel": "feishu", "chat_id": "oc"},
        "payload": {"prompt": "p"},
    }
    scheduler = await harness.start([job])
    harness.clock.advance(60)
    await asyncio.wait_for(harness.host.agent_started.wait(), 5)
    await scheduler.stop()
    [run] = await harness.runs("slow")
    assert run.status is RunStatus.INTERRUPTED


async def test_stop_with_grace_lets_a_running_run_finish(harness: Harness) -> None:
    hold = asyncio.Event()
    harness.host.hold = hold
    job = {
        "id": "slow",
        "kind": "agent_task",
        "schedule": {"type": "interval", "seconds": 60},
        "target": {"channel": "feishu", "chat_id": "oc"},
        "payload": {"prompt": "p"},
    }
    scheduler = await harness.start([job])
    harness.clock.advance(60)
    await asyncio.wait_for(harness.host.agent_started.wait(), 5)
    stopping = asyncio.create_task(scheduler.stop(grace_secs=5), name="stop")
    for _ in range(20):  # yield to stop(): without a grace it would cancel the run by now
        await asyncio.sleep(0)
    assert scheduler._state == "stopped"
    assert not stopping.done()
    hold.set()
    await asyncio.wait_for(stopping, 5)
    [run] = await harness.runs("slow")
    assert run.status is RunStatus.SUCCEEDED


async def test_a_paused_config_job_stays_paused_across_a_restart(harness: Harness) -> None:
    first = await harness.start([interval_job(seconds=60)])
    assert (await first.manage("pause", {"job_id": "tick"}, **AS_ADMIN))["ok"]
    second = await restart(harness, first, 10)
    await harness.tick(600)
    assert harness.host.sent == []
    [view] = (await second.manage("list", {}, **AS_ADMIN))["jobs"]
    assert view["state"] == "paused"


async def test_the_builtin_memory_job_follows_its_handler_and_config_overrides(
    harness: Harness,
) -> None:
    events = EventRegistry()

    async def maintain(event: InternalEvent) -> None:
        return None

    events.register("memory_maintenance", maintain)
    first = await harness.start([], events=events)
    [view] = (await first.manage("list", {}, **AS_ADMIN))["jobs"]
    assert (view["id"], view["source"], view["state"]) == (
        "builtin.memory_maintenance_daily",
        "builtin",
        "scheduled",
    )
    assert view["next_run_at"] == "2026-03-02T16:00:00+00:00"
    await first.stop()
    override = {
        "id": "builtin.memory_maintenance_daily",
        "kind": "internal_event",
        "enabled": False,
        "schedule": {"type": "cron", "expression": "0 3 * * *"},
        "payload": {"event": "memory_maintenance"},
    }
    second = await harness.start([override], events=events)
    [view] = (await second.manage("list", {}, **AS_ADMIN))["jobs"]
    assert (view["source"], view["state"]) == ("config", "disabled")
    await second.stop()
    third = await harness.start([], events=EventRegistry())  # no handler: no builtin job
    assert (await third.manage("list", {}, **AS_ADMIN))["jobs"] == []
