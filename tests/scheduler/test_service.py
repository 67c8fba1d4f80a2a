"""The engine on a manual clock and real SQLite: each job kind, overlap, timeouts, run-time jobs."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
import structlog.testing

from gateway.bus import Delivery, NoSuchChannel, Origin, SessionPolicy, TurnRequest
from scheduler.clock import ManualClock
from scheduler.config import SchedulerConfig
from scheduler.events import EventRegistry, InternalEvent
from scheduler.service import Scheduler
from storage.sql.jobs import JobRecord, JobSource, RunCause, get_job, save_job
from storage.sqlite.db import Database, StorageClosed
from tests.scheduler.conftest import (
    AS_ADMIN,
    START,
    WAIT,
    Harness,
    RecordingHost,
    interval_job,
    statuses,
)


def agent_job(
    job_id: str = "daily", kind: str = "agent_task", **extra: object
) -> dict[str, object]:
    return {
        "id": job_id,
        "kind": kind,
        "schedule": {"type": "interval", "seconds": 60},
        "target": {"channel": "feishu", "chat_id": "oc_main"},
        "payload": {
            "prompt": "summarise today",
            "agent": "default",
            "fresh_session": True,
            "system_prompt": "you write daily reports",
            "sender_id": "scheduler-daily",
            "metadata": {"job_type": "daily_summary"},
        },
        **extra,
    }


async def test_interval_job_fires_once_per_interval_and_not_before(harness: Harness) -> None:
    await harness.start([interval_job(seconds=60)])
    await harness.tick(59)
    assert harness.host.sent == []
    await harness.tick(1)
    assert harness.host.sent == [("telegram", "42", "ping from tick")]
    await harness.tick(60)
    await harness.tick(60)
    assert len(harness.host.sent) == 3
    runs = await harness.runs("tick")
    assert statuses(runs) == ["succeeded"] * 3
    assert [r.scheduled_at - START for r in runs] == [timedelta(seconds=s) for s in (60, 120, 180)]
    assert all(r.started_at is not None and r.duration_ms is not None for r in runs)


async def test_wake_up_is_rounded_up_to_the_tick_resolution(harness: Harness) -> None:
    await harness.start([interval_job(seconds=0.3)], tick_resolution_ms=1000)
    await harness.tick(0.5)  # due at +0.3, but the engine sleeps to the next whole second
    assert harness.host.sent == []
    await harness.tick(0.5)
    assert len(harness.host.sent) == 1  # the three fire times that passed are coalesced


async def test_agent_task_submits_the_synthetic_message_for_the_target_chat(
    harness: Harness,
) -> None:
    await harness.start([agent_job()])
    await harness.tick(60)
    [message] = harness.host.agent_messages
    assert (message.channel, message.chat_id, message.sender_id) == (
        "feishu",
        "oc_main",
        "scheduler-daily",
    )
    assert message.text == "summarise today"
    assert message.message_id == "scheduler:daily:2026-03-02T12:01:00.000000+00:00"
    assert message.request == TurnRequest(
        origin=Origin.SCHEDULER,
        agent="default",
        session=SessionPolicy.FRESH,
        delivery=Delivery.REPLY,
        system_prompt="you write daily reports",
        job_id="daily",
        max_tokens=200_000,  # scheduler.max_run_tokens: the run's own cap
    )
    assert message.metadata == {"job_type": "daily_summary"}  # labels only, no control keys
    assert harness.host.sent == []  # the reply is the pipeline's business


async def test_silent_task_runs_in_its_own_session_and_sends_nothing_on_success(
    harness: Harness,
) -> None:
    await harness.start([agent_job("weekly", kind="silent_agent_task")])
    await harness.tick(60)
    [message] = harness.host.agent_messages
    assert message.chat_id == "scheduler/weekly"
    assert message.request.delivery is Delivery.FAILURES_ONLY
    assert message.request.notify_chat_id == "oc_main"
    assert message.request.job_id == "weekly"
    assert harness.host.sent == []
    assert statuses(await harness.runs("weekly")) == ["succeeded"]


async def test_a_failing_run_is_recorded_with_its_error_and_the_job_keeps_going(
    harness: Harness,
) -> None:
    harness.host.fail_with = RuntimeError("provider down")
    await harness.start([agent_job()])
    await harness.tick(60)
    harness.host.fail_with = None
    await harness.tick(60)
    runs = await harness.runs("daily")
    assert statuses(runs) == ["failed", "succeeded"]
    assert runs[0].error == "RuntimeError: provider down"


async def test_a_job_for_a_disabled_channel_fails_in_one_line(harness: Harness) -> None:
    """A stored job whose channel was since disabled: each run fails with the
    reason and no traceback (the config check catches configured jobs)."""
    harness.host.fail_with = NoSuchChannel("channel 'feishu' is not enabled")
    with structlog.testing.capture_logs() as logs:
        await harness.start([agent_job()])
        await harness.tick(60)
    [run] = await harness.runs("daily")
    assert (run.status.value, run.error) == ("failed", "channel 'feishu' is not enabled")
    events = [entry["event"] for entry in logs]
    assert "scheduled_run_failed" in events
    assert "scheduled_run_error" not in events  # the traceback's line


async def test_a_silent_task_that_times_out_notifies_the_main_chat(harness: Harness) -> None:
    harness.host.hold = asyncio.Event()  # never released: the run must hit its timeout
    await harness.start([agent_job("bg", kind="silent_agent_task", timeout_secs=0.05)])
    await harness.tick(60)
    runs = await harness.runs("bg")
    assert statuses(runs) == ["timed_out"]
    assert runs[0].error == "timed out after 0.05s"
    assert harness.host.failures == [("feishu", "oc_main", "bg")]


async def test_a_run_still_running_makes_the_next_fire_time_skip(harness: Harness) -> None:
    hold = asyncio.Event()
    harness.host.hold = hold
    scheduler = await harness.start([agent_job()], max_concurrent_runs=4)
    harness.clock.advance(60)
    await asyncio.wait_for(harness.host.agent_started.wait(), WAIT)
    harness.clock.advance(60)  # the first run is still held
    await asyncio.wait_for(harness.clock.wait_sleeping(), WAIT)
    hold.set()
    await asyncio.wait_for(scheduler.wait_idle(), WAIT)
    runs = await harness.runs("daily")
    assert statuses(runs) == ["succeeded", "skipped"]
    assert len(harness.host.agent_messages) == 1
    await harness.tick(60)
    assert statuses(await harness.runs("daily")) == ["succeeded", "skipped", "succeeded"]


async def test_overlap_allow_lets_runs_of_one_job_run_together(harness: Harness) -> None:
    hold = asyncio.Event()
    harness.host.hold = hold
    scheduler = await harness.start([agent_job(overlap_policy="allow")], max_concurrent_runs=4)
    harness.clock.advance(60)
    await asyncio.wait_for(harness.host.agent_started.wait(), WAIT)
    harness.clock.advance(60)
    await asyncio.wait_for(harness.clock.wait_sleeping(), WAIT)
    hold.set()
    await asyncio.wait_for(scheduler.wait_idle(), WAIT)
    assert statuses(await harness.runs("daily")) == ["succeeded", "succeeded"]
    assert len(harness.host.agent_messages) == 2


async def test_internal_event_reaches_its_registered_handler(harness: Harness) -> None:
    events = EventRegistry()
    seen: list[InternalEvent] = []

    async def handler(event: InternalEvent) -> None:
        seen.append(event)

    events.register("digest", handler)
    job = {
        "id": "digest.hourly",
        "kind": "internal_event",
        "schedule": {"type": "interval", "seconds": 3600},
        "payload": {"event": "digest", "depth": 2},
    }
    unknown = {**job, "id": "nobody.listens", "payload": {"event": "nobody"}}
    await harness.start([job, unknown], events=events)
    await harness.tick(3600)
    [event] = seen
    assert (event.name, event.job_id, dict(event.arguments)) == (
        "digest",
        "digest.hourly",
        {"depth": 2},
    )
    assert event.scheduled_at == START + timedelta(hours=1)
    [failed] = await harness.runs("nobody.listens")
    assert failed.status.value == "failed"
    assert failed.error is not None
    assert "no handler is registered" in failed.error


async def test_a_job_put_at_run_time_fires_without_restart(harness: Harness) -> None:
    scheduler = await harness.start([])
    result = await scheduler.manage(
        "put",
        {
            "job": {
                "id": "reminder",
                "kind": "outbound_message",
                "schedule": {"type": "delay", "seconds": 30},
                "target": {"channel": "telegram", "chat_id": "9"},
                "payload": {"text": "stand up"},
            }
        },
        channel="telegram",
        sender_id="9",
        admin=False,
    )
    assert result["ok"] is True, result
    await harness.settle()
    await harness.tick(29)
    assert harness.host.sent == []
    await harness.tick(1)
    assert harness.host.sent == [("telegram", "9", "stand up")]
    await harness.tick(3600)
    assert len(harness.host.sent) == 1  # a delay job fires once
    listed = await scheduler.manage("list", {}, **AS_ADMIN)
    assert [(j["id"], j["state"], j["last_run"]["status"]) for j in listed["jobs"]] == [
        ("reminder", "done", "succeeded")
    ]


async def test_pause_stops_firing_and_resume_restarts_the_timing(harness: Harness) -> None:
    scheduler = await harness.start([interval_job(seconds=60)])
    assert (await scheduler.manage("pause", {"job_id": "tick"}, **AS_ADMIN))["job"][
        "state"
    ] == "paused"
    await harness.settle()
    await harness.tick(600)
    assert harness.host.sent == []
    resumed = await scheduler.manage("resume", {"job_id": "tick"}, **AS_ADMIN)
    assert resumed["job"]["next_run_at"] == (START + timedelta(seconds=660)).isoformat()
    await harness.settle()
    await harness.tick(60)
    assert len(harness.host.sent) == 1
    assert statuses(await harness.runs("tick")) == ["succeeded"]  # nothing made up for the pause


async def test_a_manual_run_request_runs_once_even_while_paused(harness: Harness) -> None:
    scheduler = await harness.start([interval_job(seconds=3600)])
    await scheduler.manage("pause", {"job_id": "tick"}, **AS_ADMIN)
    await scheduler.admin.request_run("tick")
    scheduler.wake()
    await harness.settle()
    await harness.tick(1)
    assert len(harness.host.sent) == 1
    [run] = await harness.runs("tick")
    assert (run.cause, run.status.value) == (RunCause.MANUAL, "succeeded")
    await harness.tick(7200)
    assert len(harness.host.sent) == 1


async def test_run_outcomes_reach_the_status_observer(harness: Harness) -> None:
    seen: list[str] = []
    hold = asyncio.Event()
    harness.host.hold = hold
    harness.host.fail_with = RuntimeError("boom")
    scheduler = await harness.start([agent_job()], on_run_status=seen.append)
    harness.clock.advance(60)
    await asyncio.wait_for(harness.host.agent_started.wait(), WAIT)
    harness.clock.advance(60)  # overlaps the held run
    await asyncio.wait_for(harness.clock.wait_sleeping(), WAIT)
    hold.set()
    await asyncio.wait_for(scheduler.wait_idle(), WAIT)
    assert seen == ["skipped", "failed"]


async def test_a_job_that_cannot_be_planned_is_parked_and_others_still_fire(
    harness: Harness,
) -> None:
    db = await harness.open_db()
    broken = JobRecord(
        id="broken",
        source=JobSource.RUNTIME,
        kind="agent_task",
        definition={"id": "broken", "kind": "agent_task"},  # written by some other version
        enabled=True,
        paused=False,
        overlap_policy="skip",
        next_run_at=START,
        run_requested_at=None,
        created_at=START,
        updated_at=START,
    )
    await db.write(lambda c: save_job(c, broken))
    await harness.start([interval_job(seconds=60)])
    await harness.tick(60)
    assert len(harness.host.sent) == 1
    parked = await db.read(lambda c: get_job(c, "broken"))
    assert parked is not None
    assert parked.next_run_at is None
    assert await harness.runs("broken") == []


async def test_a_scheduler_that_failed_to_start_stops_cleanly(
    tmp_path: Path, clock: ManualClock, host: RecordingHost
) -> None:
    """A service whose start failed is stopped with the others; a scheduler
    that failed before it had tasks raised IndexError there."""
    db = await Database(tmp_path / "closed.db").open()
    await db.close()
    config = SchedulerConfig.model_validate({"enabled": True})
    scheduler = Scheduler(config, db, host, clock=clock, default_zone=ZoneInfo("UTC"))
    with pytest.raises(StorageClosed):
        await scheduler.start()
    await scheduler.stop()
    assert not scheduler.running
