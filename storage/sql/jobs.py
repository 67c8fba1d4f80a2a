"""Persistence of scheduler jobs (`scheduler_jobs`) and their run history (`job_runs`).

Plain synchronous functions of a `sqlite3.Connection`, meant to be composed by
the scheduler into one `Database.write` transaction (claiming a run and
advancing `next_run_at` must commit together). This module knows nothing about
schedules or job kinds: a job's definition is opaque JSON here.

Times are stored as UTC ISO-8601 text with a fixed width, so text order is time
order and the `next_run_at` index serves the due-job query.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from storage.sql.cluster import live_worker
from storage.sql.dialect import inserted_id

__all__ = [
    "AdoptedRun",
    "JobOwner",
    "JobRecord",
    "JobSource",
    "RunCause",
    "RunRecord",
    "RunStatus",
    "adopt_runs_of_dead_workers",
    "delete_job",
    "delete_jobs_of_source_except",
    "due_jobs",
    "finish_run",
    "from_db_time",
    "get_job",
    "has_unfinished_run",
    "insert_run",
    "interrupt_unfinished_runs",
    "last_runs",
    "list_jobs",
    "list_jobs_of",
    "list_runs",
    "mark_run_started",
    "next_due_at",
    "save_job",
    "set_job_schedule_state",
    "set_paused",
    "set_run_requested",
    "to_db_time",
]


class JobSource(StrEnum):
    CONFIG = "config"  # the config file owns the definition
    BUILTIN = "builtin"  # shipped with picobot, overridable by config
    RUNTIME = "runtime"  # created by the scheduler_manage tool


class RunCause(StrEnum):
    SCHEDULE = "schedule"
    CATCH_UP = "catch_up"  # a misfire made up once (policy run_once)
    MANUAL = "manual"  # `picobot jobs run`


class RunStatus(StrEnum):
    CLAIMED = "claimed"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    SKIPPED = "skipped"  # the previous run was still running (overlap policy skip)
    MISSED = "missed"  # the fire time passed while nobody could run it (policy skip)
    INTERRUPTED = "interrupted"  # the daemon stopped or died during the run


UNFINISHED = (RunStatus.CLAIMED.value, RunStatus.RUNNING.value)


def to_db_time(moment: datetime) -> str:
    if moment.tzinfo is None:
        raise ValueError("naive datetime passed to storage")
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def from_db_time(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def _opt_time(text: str | None) -> datetime | None:
    return None if text is None else from_db_time(text)


@dataclass(frozen=True, slots=True)
class JobOwner:
    """Who created a runtime job: a sender on a channel (the principal it acts as)."""

    channel: str
    sender_id: str

    def __str__(self) -> str:
        return f"{self.channel}:{self.sender_id}"


@dataclass(frozen=True, slots=True)
class JobRecord:
    id: str
    source: JobSource
    kind: str
    definition: dict[str, Any]
    enabled: bool
    paused: bool
    overlap_policy: str
    next_run_at: datetime | None
    run_requested_at: datetime | None
    created_at: datetime
    updated_at: datetime
    # None: a config or built-in job, or a runtime job stored before owners were recorded
    owner: JobOwner | None = None

    @property
    def active(self) -> bool:
        return self.enabled and not self.paused


@dataclass(frozen=True, slots=True)
class RunRecord:
    id: int
    job_id: str
    scheduled_at: datetime
    cause: RunCause
    status: RunStatus
    claimed_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    duration_ms: int | None
    error: str | None


_JOB_COLUMNS = (
    "id, source, kind, definition, enabled, paused, overlap_policy, next_run_at, "
    "run_requested_at, created_at, updated_at, owner_channel, owner_sender_id"
)
_RUN_COLUMNS = (
    "id, job_id, scheduled_at, cause, status, claimed_at, started_at, finished_at, "
    "duration_ms, error"
)


def _job(row: tuple[Any, ...]) -> JobRecord:
    return JobRecord(
        id=row[0],
        source=JobSource(row[1]),
        kind=row[2],
        definition=json.loads(row[3]),
        enabled=bool(row[4]),
        paused=bool(row[5]),
        overlap_policy=row[6],
        next_run_at=_opt_time(row[7]),
        run_requested_at=_opt_time(row[8]),
        created_at=from_db_time(row[9]),
        updated_at=from_db_time(row[10]),
        owner=None if row[11] is None or row[12] is None else JobOwner(row[11], row[12]),
    )


def _run(row: tuple[Any, ...]) -> RunRecord:
    return RunRecord(
        id=row[0],
        job_id=row[1],
        scheduled_at=from_db_time(row[2]),
        cause=RunCause(row[3]),
        status=RunStatus(row[4]),
        claimed_at=from_db_time(row[5]),
        started_at=_opt_time(row[6]),
        finished_at=_opt_time(row[7]),
        duration_ms=row[8],
        error=row[9],
    )


# -- jobs ----------------------------------------------------------------------
def get_job(conn: sqlite3.Connection, job_id: str) -> JobRecord | None:
    row = conn.execute(f"SELECT {_JOB_COLUMNS} FROM scheduler_jobs WHERE id = ?", (job_id,))
    found = row.fetchone()
    return None if found is None else _job(tuple(found))


def list_jobs(conn: sqlite3.Connection) -> list[JobRecord]:
    rows = conn.execute(f"SELECT {_JOB_COLUMNS} FROM scheduler_jobs ORDER BY id")
    return [_job(tuple(r)) for r in rows.fetchall()]


def list_jobs_of(conn: sqlite3.Connection, owner: JobOwner) -> list[JobRecord]:
    """The jobs `owner` created (at run time)."""
    rows = conn.execute(
        f"SELECT {_JOB_COLUMNS} FROM scheduler_jobs WHERE owner_channel = ? "
        "AND owner_sender_id = ? ORDER BY id",
        (owner.channel, owner.sender_id),
    )
    return [_job(tuple(r)) for r in rows.fetchall()]


def save_job(conn: sqlite3.Connection, job: JobRecord) -> None:
    """Insert or replace a job's row (run history is kept)."""
    owner = job.owner
    conn.execute(
        f"INSERT INTO scheduler_jobs ({_JOB_COLUMNS}) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (id) DO UPDATE SET source = excluded.source, kind = excluded.kind, "
        "definition = excluded.definition, enabled = excluded.enabled, "
        "paused = excluded.paused, overlap_policy = excluded.overlap_policy, "
        "next_run_at = excluded.next_run_at, run_requested_at = excluded.run_requested_at, "
        "updated_at = excluded.updated_at, owner_channel = excluded.owner_channel, "
        "owner_sender_id = excluded.owner_sender_id",
        (
            job.id,
            job.source.value,
            job.kind,
            json.dumps(job.definition, ensure_ascii=False, sort_keys=True),
            int(job.enabled),
            int(job.paused),
            job.overlap_policy,
            None if job.next_run_at is None else to_db_time(job.next_run_at),
            None if job.run_requested_at is None else to_db_time(job.run_requested_at),
            to_db_time(job.created_at),
            to_db_time(job.updated_at),
            None if owner is None else owner.channel,
            None if owner is None else owner.sender_id,
        ),
    )


def delete_job(conn: sqlite3.Connection, job_id: str) -> bool:
    """Delete a job and (by cascade) its run history."""
    return conn.execute("DELETE FROM scheduler_jobs WHERE id = ?", (job_id,)).rowcount > 0


def delete_jobs_of_source_except(
    conn: sqlite3.Connection, source: JobSource, keep: Iterable[str]
) -> list[str]:
    """Delete the jobs of `source` whose ids are not in `keep`; returns the deleted ids."""
    keep_set = set(keep)
    rows = conn.execute("SELECT id FROM scheduler_jobs WHERE source = ?", (source.value,))
    doomed = [r[0] for r in rows.fetchall() if r[0] not in keep_set]
    conn.executemany("DELETE FROM scheduler_jobs WHERE id = ?", [(i,) for i in doomed])
    return doomed


def set_paused(
    conn: sqlite3.Connection,
    job_id: str,
    paused: bool,
    next_run_at: datetime | None,
    now: datetime,
) -> bool:
    cur = conn.execute(
        "UPDATE scheduler_jobs SET paused = ?, next_run_at = ?, updated_at = ? WHERE id = ?",
        (
            int(paused),
            None if next_run_at is None else to_db_time(next_run_at),
            to_db_time(now),
            job_id,
        ),
    )
    return cur.rowcount > 0


def set_run_requested(conn: sqlite3.Connection, job_id: str, at: datetime | None) -> bool:
    cur = conn.execute(
        "UPDATE scheduler_jobs SET run_requested_at = ? WHERE id = ?",
        (None if at is None else to_db_time(at), job_id),
    )
    return cur.rowcount > 0


def set_job_schedule_state(
    conn: sqlite3.Connection, job_id: str, next_run_at: datetime | None
) -> None:
    """Advance a job's next fire time (does not touch `updated_at`: not a definition change)."""
    conn.execute(
        "UPDATE scheduler_jobs SET next_run_at = ? WHERE id = ?",
        (None if next_run_at is None else to_db_time(next_run_at), job_id),
    )


def due_jobs(conn: sqlite3.Connection, now: datetime, limit: int) -> list[JobRecord]:
    """Active jobs whose fire time has come, and any job with a manual run waiting."""
    rows = conn.execute(
        f"SELECT {_JOB_COLUMNS} FROM scheduler_jobs WHERE run_requested_at IS NOT NULL "
        "OR (enabled = 1 AND paused = 0 AND next_run_at <= ?) "
        "ORDER BY COALESCE(run_requested_at, next_run_at) LIMIT ?",
        (to_db_time(now), limit),
    )
    return [_job(tuple(r)) for r in rows.fetchall()]


def next_due_at(conn: sqlite3.Connection) -> datetime | None:
    """The earliest moment any job needs the engine (None: nothing scheduled)."""
    row = conn.execute(
        "SELECT MIN(t) FROM (SELECT run_requested_at AS t FROM scheduler_jobs "
        "WHERE run_requested_at IS NOT NULL UNION ALL SELECT next_run_at FROM scheduler_jobs "
        "WHERE enabled = 1 AND paused = 0 AND next_run_at IS NOT NULL) AS due"
    ).fetchone()
    return _opt_time(row[0])


# -- runs ------------------------------------------------------------------------
def insert_run(
    conn: sqlite3.Connection,
    job_id: str,
    scheduled_at: datetime,
    cause: RunCause,
    status: RunStatus,
    now: datetime,
    error: str | None = None,
    worker: str | None = None,
) -> int | None:
    """Record a run; None when (job_id, scheduled_at) was already recorded (a
    claim lost). `worker`: the claimer, with several workers (docs/scale-out.md)."""
    finished = None if status.value in UNFINISHED else to_db_time(now)
    cur = conn.execute(
        "INSERT INTO job_runs (job_id, scheduled_at, cause, status, claimed_at, finished_at, "
        "error, worker) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (job_id, scheduled_at) DO NOTHING RETURNING id",
        (
            job_id,
            to_db_time(scheduled_at),
            cause.value,
            status.value,
            to_db_time(now),
            finished,
            error,
            worker,
        ),
    )
    return inserted_id(cur)


@dataclass(frozen=True, slots=True)
class AdoptedRun:
    run_id: int
    job_id: str
    scheduled_at: datetime
    cause: RunCause


def adopt_runs_of_dead_workers(conn: sqlite3.Connection, worker: str) -> list[AdoptedRun]:
    """Make `worker` the claimer of every unfinished run whose claimer is a dead
    worker (docs/scale-out.md): they run again here, each slot once (an agent
    task's message is recorded once in the inbox whoever submits it)."""
    rows = conn.execute(
        "UPDATE job_runs SET worker = ?, status = ? WHERE status IN (?, ?) "
        f"AND worker IS NOT NULL AND worker != ? AND NOT {live_worker(conn, 'job_runs.worker')} "
        "RETURNING id, job_id, scheduled_at, cause",
        (worker, RunStatus.CLAIMED.value, *UNFINISHED, worker),
    ).fetchall()
    return [AdoptedRun(int(r[0]), r[1], from_db_time(r[2]), RunCause(r[3])) for r in rows]


def has_unfinished_run(conn: sqlite3.Connection, job_id: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM job_runs WHERE job_id = ? AND status IN (?, ?) LIMIT 1",
        (job_id, *UNFINISHED),
    ).fetchone()
    return row is not None


def mark_run_started(conn: sqlite3.Connection, run_id: int, at: datetime) -> None:
    conn.execute(
        "UPDATE job_runs SET status = ?, started_at = ? WHERE id = ?",
        (RunStatus.RUNNING.value, to_db_time(at), run_id),
    )


def finish_run(
    conn: sqlite3.Connection,
    run_id: int,
    status: RunStatus,
    finished_at: datetime,
    duration_ms: int | None,
    error: str | None,
    *,
    keep_history: int,
) -> None:
    """Record a run's outcome and prune the job's history to its `keep_history` newest runs."""
    conn.execute(
        "UPDATE job_runs SET status = ?, finished_at = ?, duration_ms = ?, error = ? WHERE id = ?",
        (status.value, to_db_time(finished_at), duration_ms, error, run_id),
    )
    conn.execute(
        "DELETE FROM job_runs WHERE job_id = (SELECT job_id FROM job_runs WHERE id = ?) "
        "AND status NOT IN (?, ?) AND id NOT IN (SELECT id FROM job_runs WHERE job_id = "
        "(SELECT job_id FROM job_runs WHERE id = ?) ORDER BY id DESC LIMIT ?)",
        (run_id, *UNFINISHED, run_id, keep_history),
    )


def interrupt_unfinished_runs(
    conn: sqlite3.Connection,
    at: datetime,
    run_ids: Iterable[int] | None = None,
    *,
    unclaimed_only: bool = False,
) -> int:
    """Mark claimed/running runs interrupted: all of them (start-up) or only
    `run_ids` (stop). `unclaimed_only` (start-up with several workers): only
    those no worker claimed (written by a single gateway); a dead worker's are
    adopted instead (`adopt_runs_of_dead_workers`)."""
    params: list[Any] = [RunStatus.INTERRUPTED.value, to_db_time(at), *UNFINISHED]
    sql = (
        "UPDATE job_runs SET status = ?, finished_at = ?, "
        "error = COALESCE(error, 'the daemon stopped before the run finished') "
        "WHERE status IN (?, ?)"
    )
    if unclaimed_only:
        sql += " AND worker IS NULL"
    if run_ids is not None:
        ids = list(run_ids)
        if not ids:
            return 0
        sql += f" AND id IN ({', '.join('?' * len(ids))})"
        params.extend(ids)
    return conn.execute(sql, params).rowcount


def list_runs(conn: sqlite3.Connection, job_id: str, limit: int = 20) -> list[RunRecord]:
    """A job's newest runs first."""
    rows = conn.execute(
        f"SELECT {_RUN_COLUMNS} FROM job_runs WHERE job_id = ? ORDER BY id DESC LIMIT ?",
        (job_id, limit),
    )
    return [_run(tuple(r)) for r in rows.fetchall()]


def last_runs(conn: sqlite3.Connection) -> dict[str, RunRecord]:
    """Each job's newest run."""
    rows = conn.execute(
        f"SELECT {_RUN_COLUMNS} FROM job_runs WHERE id IN "
        "(SELECT MAX(id) FROM job_runs GROUP BY job_id)"
    )
    return {r.job_id: r for r in (_run(tuple(row)) for row in rows.fetchall())}
