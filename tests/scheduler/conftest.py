"""Scheduler test fixtures: real SQLite on tmp_path, a manual clock, a recording host.

`RecordingHost` is a fake at our own boundary (the `SchedulerHost` protocol the
composition root implements): it records calls and can hold or fail agent
tasks. `Harness.tick` advances the clock and waits, on events, until every
engine is asleep again and every claimed run has finished.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from gateway.bus import InboundMessage
from scheduler.clock import ManualClock
from scheduler.config import SchedulerConfig
from scheduler.events import EventRegistry
from scheduler.service import Scheduler
from storage.sql.jobs import RunRecord, list_runs
from storage.sqlite.db import Database

START = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
# `Scheduler.manage` as an admin, who reaches every job (config and built-in ones too)
AS_ADMIN: dict[str, Any] = {"channel": "telegram", "sender_id": "admin", "admin": True}
WAIT = 5.0  # bound on awaiting an event that must happen


class RecordingHost:
    def __init__(self) -> None:
        self.sent: list[tuple[str, str, str]] = []
        self.failures: list[tuple[str, str, str]] = []  # (channel, chat, job id)
        self.agent_messages: list[InboundMessage] = []
        self.agent_started = asyncio.Event()
        self.hold: asyncio.Event | None = None  # agent tasks wait for it when set
        self.fail_with: BaseException | None = None

    async def send_message(self, channel: str, chat_id: str, text: str) -> None:
        self.sent.append((channel, chat_id, text))

    async def notify_failure(self, channel: str, chat_id: str, job_id: str) -> None:
        self.failures.append((channel, chat_id, job_id))

    async def run_agent_task(self, message: InboundMessage) -> None:
        self.agent_messages.append(message)
        self.agent_started.set()
        if self.hold is not None:
            await self.hold.wait()
        if self.fail_with is not None:
            raise self.fail_with


class Harness:
    def __init__(self, db_path: Path, clock: ManualClock, host: RecordingHost) -> None:
        self.db_path = db_path
        self.clock = clock
        self.host = host
        self.db: Database | None = None
        self.schedulers: list[Scheduler] = []
        self.databases: list[Database] = []

    async def open_db(self) -> Database:
        db = await Database(self.db_path).open()
        self.databases.append(db)
        self.db = db
        return db

    async def start(
        self,
        jobs: list[dict[str, Any]] = (),  # type: ignore[assignment]
        *,
        db: Database | None = None,
        events: EventRegistry | None = None,
        zone: str = "UTC",
        on_run_status: Callable[[str], None] | None = None,
        **settings: Any,
    ) -> Scheduler:
        settings.setdefault("rescan_interval_secs", 0)
        config = SchedulerConfig.model_validate({"enabled": True, "jobs": list(jobs), **settings})
        database = db or self.db or await self.open_db()
        scheduler = Scheduler(
            config,
            database,
            self.host,
            events=events,
            clock=self.clock,
            default_zone=ZoneInfo(zone),
            on_run_status=on_run_status,
        )
        await scheduler.start()
        self.schedulers.append(scheduler)
        await asyncio.wait_for(self.clock.wait_sleeping(self.running()), WAIT)
        await self.settle()
        return scheduler

    def running(self) -> int:
        return sum(1 for s in self.schedulers if s._state == "running")

    async def settle(self) -> None:
        await asyncio.wait_for(self.clock.wait_sleeping(self.running()), WAIT)
        for scheduler in self.schedulers:
            if scheduler._state == "running":
                await asyncio.wait_for(scheduler.wait_idle(), WAIT)

    async def tick(self, seconds: float) -> None:
        self.clock.advance(seconds)
        await self.settle()

    async def runs(self, job_id: str) -> list[RunRecord]:
        assert self.db is not None
        return list(reversed(await self.db.read(lambda c: list_runs(c, job_id, 1000))))

    async def close(self) -> None:
        for scheduler in self.schedulers:
            await scheduler.stop()
        for db in self.databases:
            await db.close()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def host() -> RecordingHost:
    return RecordingHost()


@pytest.fixture
async def harness(
    tmp_path: Path, clock: ManualClock, host: RecordingHost
) -> AsyncIterator[Harness]:
    h = Harness(tmp_path / "picobot.db", clock, host)
    yield h
    await h.close()


def statuses(runs: list[RunRecord]) -> list[str]:
    return [r.status.value for r in runs]


JobFactory = Callable[..., dict[str, Any]]


def interval_job(job_id: str = "tick", seconds: float = 60, **extra: Any) -> dict[str, Any]:
    return {
        "id": job_id,
        "kind": "outbound_message",
        "schedule": {"type": "interval", "seconds": seconds},
        "target": {"channel": "telegram", "chat_id": "42"},
        "payload": {"text": f"ping from {job_id}"},
        **extra,
    }
