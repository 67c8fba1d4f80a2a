"""Claiming due runs: the body of the engine's one write transaction per look.

For each due job: decide with the planner (run, catch up, record a miss),
apply the overlap policy, insert the `job_runs` row unique on
(job_id, scheduled_at) and advance `next_run_at` — all in the caller's
transaction, so a fire time is claimed once however many engines look.
Runs on the database thread: no awaits, no event-loop objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, tzinfo

import structlog

from scheduler.config import SchedulerConfig
from scheduler.jobs import JobSpec, JobValidationError, OverlapPolicy, parse_job
from scheduler.planner import effective_misfire_policy, plan_due
from scheduler.schedules import build_schedule
from storage.database import Connection
from storage.sql import jobs as store
from storage.sql.jobs import JobRecord, RunCause, RunStatus

__all__ = ["ClaimBatch", "ClaimedRun", "Claimer"]

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class ClaimedRun:
    run_id: int
    job_id: str
    scheduled_at: datetime
    cause: RunCause
    spec: JobSpec


@dataclass(slots=True)
class ClaimBatch:
    claimed: list[ClaimedRun] = field(default_factory=list)
    noted: list[RunStatus] = field(default_factory=list)  # skipped / missed, for metrics
    next_due: datetime | None = None
    more: bool = False


class Claimer:
    def __init__(
        self, config: SchedulerConfig, default_zone: tzinfo, worker: str | None = None
    ) -> None:
        """`worker`: this worker's id with several on one database (docs/scale-out.md):
        the claimer of each run, and the one that adopts dead workers' runs."""
        self.config = config
        self.default_zone = default_zone
        self.worker = worker
        self._specs: dict[str, tuple[datetime, JobSpec]] = {}

    def _spec(self, record: JobRecord) -> JobSpec | None:
        cached = self._specs.get(record.id)
        if cached is not None and cached[0] == record.updated_at:
            return cached[1]
        try:
            spec = parse_job(record.definition)
        except JobValidationError as exc:
            log.error("scheduler_job_unreadable", job_id=record.id, error=str(exc))
            return None
        self._specs[record.id] = (record.updated_at, spec)
        return spec

    def claim(self, conn: Connection, *, now: datetime, limit: int) -> ClaimBatch:
        """One transaction: claim every due run, record misfires, advance next_run_at."""
        batch = ClaimBatch()
        if self.worker is not None:
            self._adopt(conn, batch)
        due = store.due_jobs(conn, now, limit)
        for record in due:
            # A job that cannot be planned (bad data, a library error) is parked
            # alone instead of failing every look at the database.
            conn.execute("SAVEPOINT claim_job")
            try:
                self._claim_job(conn, batch, record, now)
            except Exception:
                conn.execute("ROLLBACK TO claim_job")
                log.exception("scheduler_job_parked", job_id=record.id)
                store.set_job_schedule_state(conn, record.id, None)
                store.set_run_requested(conn, record.id, None)
            conn.execute("RELEASE claim_job")
        batch.next_due = store.next_due_at(conn)
        batch.more = len(due) >= limit
        return batch

    def _adopt(self, conn: Connection, batch: ClaimBatch) -> None:
        """Runs a dead worker claimed and did not finish run here, once."""
        assert self.worker is not None
        for run in store.adopt_runs_of_dead_workers(conn, self.worker):
            record = store.get_job(conn, run.job_id)
            spec = None if record is None else self._spec(record)
            if spec is None:
                store.interrupt_unfinished_runs(conn, run.scheduled_at, [run.run_id])
                continue
            log.warning("scheduled_run_adopted", job_id=run.job_id, run_id=run.run_id)
            batch.claimed.append(
                ClaimedRun(run.run_id, run.job_id, run.scheduled_at, run.cause, spec)
            )

    def _claim_job(
        self, conn: Connection, batch: ClaimBatch, record: JobRecord, now: datetime
    ) -> None:
        spec = self._spec(record)
        if spec is None:
            raise ValueError(f"job {record.id!r} has an unreadable definition")
        if record.run_requested_at is not None:
            store.set_run_requested(conn, record.id, None)
            self._claim_one(conn, batch, spec, record.run_requested_at, RunCause.MANUAL, now)
        if not (record.active and record.next_run_at is not None and record.next_run_at <= now):
            return
        schedule = build_schedule(spec.schedule, self.default_zone)
        policy = effective_misfire_policy(spec, schedule, self.config.misfire_policy)
        # Wake-ups are rounded up to the tick, so a tick is never late.
        grace = max(self.config.misfire_grace_secs, self.config.tick_resolution_ms / 1000)
        plan = plan_due(schedule, record.next_run_at, now, policy, timedelta(seconds=grace))
        if plan.missed_at is not None:
            store.insert_run(
                conn,
                spec.id,
                plan.missed_at,
                RunCause.SCHEDULE,
                RunStatus.MISSED,
                now,
                error="missed: the scheduler was not running at the fire time "
                "(misfire policy skip)",
            )
            batch.noted.append(RunStatus.MISSED)
            log.warning("scheduled_run_missed", job_id=spec.id, due=plan.missed_at.isoformat())
        if plan.run_at is not None:
            cause = RunCause.CATCH_UP if plan.catch_up else RunCause.SCHEDULE
            self._claim_one(conn, batch, spec, plan.run_at, cause, now)
        store.set_job_schedule_state(conn, spec.id, plan.next_run_at)

    def _claim_one(
        self,
        conn: Connection,
        batch: ClaimBatch,
        spec: JobSpec,
        scheduled_at: datetime,
        cause: RunCause,
        now: datetime,
    ) -> None:
        if spec.overlap_policy is OverlapPolicy.SKIP and store.has_unfinished_run(conn, spec.id):
            store.insert_run(
                conn,
                spec.id,
                scheduled_at,
                cause,
                RunStatus.SKIPPED,
                now,
                error="skipped: the previous run was still running (overlap policy skip)",
            )
            batch.noted.append(RunStatus.SKIPPED)
            log.info("scheduled_run_skipped_overlap", job_id=spec.id)
            return
        run_id = store.insert_run(
            conn, spec.id, scheduled_at, cause, RunStatus.CLAIMED, now, worker=self.worker
        )
        if run_id is None:
            log.info("scheduled_run_already_claimed", job_id=spec.id)
            return
        batch.claimed.append(ClaimedRun(run_id, spec.id, scheduled_at, cause, spec))
