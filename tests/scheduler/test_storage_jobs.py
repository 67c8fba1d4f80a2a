"""storage/sql/jobs.py and storage/sql/conversations/cleanup.py on every backend
(SQLite and PostgreSQL), and the session_cleanup event."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from scheduler.builtin import builtin_jobs, register_builtin_events
from scheduler.clock import ManualClock
from scheduler.events import EventRegistry, InternalEvent
from storage.backends import open_database
from storage.database import Database as StorageDatabase
from storage.sql import jobs as store
from storage.sql.conversations.cleanup import archive_idle_sessions
from storage.sql.jobs import JobOwner, JobRecord, JobSource, RunCause, RunStatus
from storage.sqlite.db import Database
from storage.sqlite.migrations import MIGRATIONS
from tests.scheduler.conftest import START, Harness
from tests.storage.conftest import parametrize_backend

T0 = datetime(2026, 2, 1, 8, 0, tzinfo=UTC)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """The tests on `storage_url` run on every backend, as tests/storage/ does."""
    parametrize_backend(metafunc)


@pytest.fixture
async def db(storage_url: str) -> AsyncIterator[StorageDatabase]:
    database = await open_database(storage_url).open()
    yield database
    await database.close()


def job(job_id: str, next_run_at: datetime | None, **kw: object) -> JobRecord:
    fields: dict[str, object] = {
        "id": job_id,
        "source": JobSource.RUNTIME,
        "kind": "outbound_message",
        "definition": {"id": job_id, "note": "opaque here"},
        "enabled": True,
        "paused": False,
        "overlap_policy": "skip",
        "next_run_at": next_run_at,
        "run_requested_at": None,
        "created_at": T0,
        "updated_at": T0,
        **kw,
    }
    return JobRecord(**fields)  # type: ignore[arg-type]


async def test_job_rows_round_trip_and_due_jobs_respect_state(db: StorageDatabase) -> None:
    records = [
        job("late", T0 + timedelta(minutes=1)),
        job("early", T0),
        job("future", T0 + timedelta(hours=1)),
        job("paused", T0, paused=True),
        job("disabled", T0, enabled=False),
        job("done", None),
    ]

    def save(conn: sqlite3.Connection) -> None:
        for record in records:
            store.save_job(conn, record)

    await db.write(save)
    assert await db.read(lambda c: store.get_job(c, "late")) == records[0]
    due = await db.read(lambda c: store.due_jobs(c, T0 + timedelta(minutes=5), 10))
    assert [j.id for j in due] == ["early", "late"]
    assert await db.read(store.next_due_at) == T0
    await db.write(lambda c: store.set_run_requested(c, "paused", T0 - timedelta(seconds=1)))
    due = await db.read(lambda c: store.due_jobs(c, T0 - timedelta(minutes=5), 10))
    assert [j.id for j in due] == ["paused"]  # a manual request counts even while paused
    assert await db.read(store.next_due_at) == T0 - timedelta(seconds=1)


async def test_a_fire_time_can_be_claimed_only_once(db: StorageDatabase) -> None:
    await db.write(lambda c: store.save_job(c, job("j", T0)))
    first = await db.write(
        lambda c: store.insert_run(c, "j", T0, RunCause.SCHEDULE, RunStatus.CLAIMED, T0)
    )
    again = await db.write(
        lambda c: store.insert_run(c, "j", T0, RunCause.SCHEDULE, RunStatus.CLAIMED, T0)
    )
    assert first is not None
    assert again is None
    assert await db.read(lambda c: store.has_unfinished_run(c, "j"))


async def test_finishing_a_run_prunes_old_history_and_delete_cascades(db: StorageDatabase) -> None:
    await db.write(lambda c: store.save_job(c, job("j", T0)))

    def run_many(conn: sqlite3.Connection) -> None:
        for i in range(5):
            at = T0 + timedelta(minutes=i)
            run_id = store.insert_run(conn, "j", at, RunCause.SCHEDULE, RunStatus.CLAIMED, at)
            assert run_id is not None
            store.mark_run_started(conn, run_id, at)
            store.finish_run(conn, run_id, RunStatus.SUCCEEDED, at, 3, None, keep_history=3)

    await db.write(run_many)
    runs = await db.read(lambda c: store.list_runs(c, "j", 10))
    assert [r.scheduled_at.minute for r in runs] == [4, 3, 2]
    assert runs[0].duration_ms == 3
    assert await db.write(lambda c: store.delete_job(c, "j"))
    assert await db.read(lambda c: store.list_runs(c, "j", 10)) == []


def _add_session(conn: sqlite3.Connection, sid: str, status: str, updated: str) -> None:
    conn.execute(
        "INSERT INTO sessions (id, channel, chat_id, status, created_at, updated_at) "
        "VALUES (?, 'telegram', ?, ?, ?, ?)",
        (sid, sid, status, updated, updated),
    )


async def test_archive_idle_sessions_only_touches_active_sessions_idle_past_the_cutoff(
    db: StorageDatabase,
) -> None:
    def seed(conn: sqlite3.Connection) -> None:
        _add_session(conn, "old", "active", "2026-01-01T00:00:00+00:00")
        _add_session(conn, "old-offset", "active", "2026-01-01T05:00:00+08:00")
        _add_session(conn, "recent", "active", "2026-01-20T00:00:00.250000+00:00")
        _add_session(conn, "already", "archived", "2025-06-01T00:00:00+00:00")

    await db.write(seed)
    cutoff = datetime(2026, 1, 10, tzinfo=UTC)
    assert await db.write(lambda c: archive_idle_sessions(c, cutoff)) == 2
    rows = await db.read(lambda c: c.execute("SELECT id, status FROM sessions").fetchall())
    assert {r[0]: r[1] for r in rows} == {
        "old": "archived",
        "old-offset": "archived",
        "recent": "active",
        "already": "archived",
    }


async def test_session_cleanup_job_uses_max_idle_secs(harness: Harness) -> None:
    db = await harness.open_db()
    await db.write(lambda c: _add_session(c, "idle", "active", "2026-03-01T11:00:00+00:00"))
    await db.write(lambda c: _add_session(c, "busy", "active", "2026-03-02T11:30:00+00:00"))
    cleanup = {
        "id": "session.cleanup",
        "kind": "internal_event",
        "schedule": {"type": "interval", "seconds": 300},
        "payload": {"event": "session_cleanup", "max_idle_secs": 3600},
    }
    await harness.start([cleanup])
    await harness.tick(300)  # now 12:05 on 03-02: cutoff 11:05
    rows = await db.read(lambda c: c.execute("SELECT id, status FROM sessions").fetchall())
    assert {r[0]: r[1] for r in rows} == {"idle": "archived", "busy": "active"}


async def test_memory_maintenance_builtin_job_exists_only_with_a_handler(
    storage_url: str,
) -> None:
    events = EventRegistry()
    async with open_database(storage_url) as database:
        register_builtin_events(events, database, ManualClock(START))
    assert "session_cleanup" in events
    assert builtin_jobs(events) == []

    async def maintain(event: InternalEvent) -> None:
        return None

    events.register("memory_maintenance", maintain)
    [builtin] = builtin_jobs(events)
    assert builtin.id == "builtin.memory_maintenance_daily"
    assert builtin.schedule.model_dump() == {
        "type": "cron",
        "expression": "0 */4 * * *",
        "timezone": None,
    }


async def test_a_jobs_owner_round_trips_and_lists_only_that_owners_jobs(
    db: StorageDatabase,
) -> None:
    alice, bob = JobOwner("telegram", "1"), JobOwner("telegram", "2")
    records = [job("a", T0, owner=alice), job("b", T0, owner=bob), job("c", T0)]

    def save(conn: sqlite3.Connection) -> None:
        for record in records:
            store.save_job(conn, record)

    await db.write(save)
    assert await db.read(lambda c: store.get_job(c, "a")) == records[0]
    assert [r.id for r in await db.read(lambda c: store.list_jobs_of(c, alice))] == ["a"]
    assert [r.id for r in await db.read(lambda c: store.list_jobs_of(c, bob))] == ["b"]
    unowned = await db.read(lambda c: store.get_job(c, "c"))
    assert unowned is not None
    assert unowned.owner is None
    assert str(alice) == "telegram:1"


async def test_jobs_stored_before_owners_were_recorded_have_none_and_keep_running(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    # every migration before the one adding owners (its number may change at a merge)
    before = next(i for i, script in enumerate(MIGRATIONS) if "owner_sender_id" in script)
    for script in MIGRATIONS[:before]:
        conn.executescript(script)
    conn.execute(
        "INSERT INTO scheduler_jobs (id, source, kind, definition, next_run_at, created_at, "
        "updated_at) VALUES ('old', 'runtime', 'outbound_message', '{}', ?, ?, ?)",
        (store.to_db_time(T0), store.to_db_time(T0), store.to_db_time(T0)),
    )
    conn.execute(f"PRAGMA user_version={before}")
    conn.commit()
    conn.close()
    async with Database(path) as db:
        [old] = await db.read(lambda c: store.list_jobs(c))
        due = await db.read(lambda c: store.due_jobs(c, T0, 10))
    assert (old.id, old.owner) == ("old", None)
    assert [r.id for r in due] == ["old"]
