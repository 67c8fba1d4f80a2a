"""Job management on the database: sync from config, put, delete, pause, resume, run now.

Shared by the running scheduler (`Scheduler.manage`, the `scheduler_manage`
tool) and the `picobot jobs` CLI, which may run while the daemon does: every
operation is one write transaction that re-reads the row it changes. Every
operation names its `JobCaller` (scheduler.owners): a job the caller may not
manage is reported as not found, and a runtime job records who created it.

Exceptions:

    SchedulerError
    ├── JobNotFound      (also: a job the caller may not manage)
    ├── JobIdTaken       (put with an id the caller may not manage)
    └── JobNotEditable   (an admin changing a config or builtin job through the tool)
    JobValidationError   (scheduler.jobs; a ValueError naming job and field)
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import Any

import structlog

from scheduler.clock import Clock
from scheduler.jobs import JobSpec, JobValidationError, parse_job
from scheduler.owners import OPERATOR, JobCaller
from scheduler.schedules import build_schedule
from storage.database import Connection, Database
from storage.sql import jobs as store
from storage.sql.jobs import JobRecord, JobSource, RunRecord

__all__ = [
    "JobAdmin",
    "JobIdTaken",
    "JobNotEditable",
    "JobNotFound",
    "JobView",
    "SchedulerError",
    "SyncReport",
]

log = structlog.get_logger(__name__)


class SchedulerError(Exception):
    """A management request that cannot be done; the message is fit for users and models."""


class JobNotFound(SchedulerError):
    def __init__(self, job_id: str) -> None:
        super().__init__(f"no job with id {job_id!r}")
        self.job_id = job_id


class JobIdTaken(SchedulerError):
    """Another principal's job, or a config or builtin job, has this id; says nothing more."""

    def __init__(self, job_id: str) -> None:
        super().__init__(f"the job id {job_id!r} is not available; choose another id")
        self.job_id = job_id


class JobNotEditable(SchedulerError):
    pass


@dataclass(frozen=True, slots=True)
class JobView:
    record: JobRecord
    last_run: RunRecord | None
    runs: tuple[RunRecord, ...] = ()

    @property
    def state(self) -> str:
        if not self.record.enabled:
            return "disabled"
        if self.record.paused:
            return "paused"
        return "scheduled" if self.record.next_run_at is not None else "done"

    def to_dict(self, zone: tzinfo, *, full: bool = False) -> dict[str, Any]:
        rec = self.record
        out: dict[str, Any] = {
            "id": rec.id,
            "kind": rec.kind,
            "source": rec.source.value,
            "state": self.state,
            "owner": None if rec.owner is None else str(rec.owner),
            "schedule": rec.definition.get("schedule"),
            "next_run_at": _local(rec.next_run_at, zone),
            "last_run": None if self.last_run is None else _run_dict(self.last_run, zone),
        }
        if rec.run_requested_at is not None:
            out["run_requested_at"] = _local(rec.run_requested_at, zone)
        if full:
            out["definition"] = rec.definition
            out["runs"] = [_run_dict(r, zone) for r in self.runs]
        return out


def _local(moment: datetime | None, zone: tzinfo) -> str | None:
    return None if moment is None else moment.astimezone(zone).isoformat(timespec="seconds")


def _run_dict(run: RunRecord, zone: tzinfo) -> dict[str, Any]:
    return {
        "scheduled_at": _local(run.scheduled_at, zone),
        "cause": run.cause.value,
        "status": run.status.value,
        "started_at": _local(run.started_at, zone),
        "finished_at": _local(run.finished_at, zone),
        "duration_ms": run.duration_ms,
        "error": run.error,
    }


@dataclass(frozen=True, slots=True)
class SyncReport:
    added: tuple[str, ...]
    updated: tuple[str, ...]
    removed: tuple[str, ...]


def _owner(source: JobSource) -> str:
    return "picobot's built-in jobs" if source is JobSource.BUILTIN else "the config file"


def _stored_schedule_key(record: JobRecord) -> str | None:
    try:
        return parse_job(record.definition).schedule_key()
    except JobValidationError:
        return None  # written by another version: treat the schedule as changed


class JobAdmin:
    def __init__(self, db: Database, *, clock: Clock, default_zone: tzinfo) -> None:
        self.db = db
        self.clock = clock
        self.default_zone = default_zone

    # -- reading ---------------------------------------------------------------
    async def list_jobs(self, *, caller: JobCaller) -> list[JobView]:
        """The jobs `caller` may manage: an admin's all, a user's own."""

        def read(conn: Connection) -> list[JobView]:
            last = store.last_runs(conn)
            if caller.admin:
                records = store.list_jobs(conn)
            elif caller.owner is not None:
                records = store.list_jobs_of(conn, caller.owner)
            else:
                records = []
            return [JobView(r, last.get(r.id)) for r in records if caller.may_manage(r)]

        return await self.db.read(read)

    async def get(self, job_id: str, *, caller: JobCaller, runs: int = 10) -> JobView:
        def read(conn: Connection) -> JobView | None:
            record = store.get_job(conn, job_id)
            if record is None or not caller.may_manage(record):
                return None
            history = store.list_runs(conn, job_id, runs)
            return JobView(record, history[0] if history else None, tuple(history))

        view = await self.db.read(read)
        if view is None:
            raise JobNotFound(job_id)
        return view

    # -- writing ---------------------------------------------------------------
    def _upsert(
        self,
        conn: Connection,
        spec: JobSpec,
        source: JobSource,
        now: datetime,
        caller: JobCaller = OPERATOR,
    ) -> bool:
        """Insert or update one job; True if it was new. Same schedule keeps the timing.

        A runtime job belongs to `caller` (an admin replacing another's job takes
        it over: the job now acts as the admin)."""
        old = store.get_job(conn, spec.id)
        if old is not None and source is JobSource.RUNTIME:
            if not caller.may_manage(old):
                raise JobIdTaken(spec.id)
            if old.source is not JobSource.RUNTIME:
                raise JobNotEditable(
                    f"job {spec.id!r} is defined in {_owner(old.source)}; "
                    "change it there, or choose another id"
                )
        if old is not None and _stored_schedule_key(old) == spec.schedule_key():
            next_run_at = old.next_run_at
        else:
            next_run_at = build_schedule(spec.schedule, self.default_zone).first_fire(now)
        record = JobRecord(
            id=spec.id,
            source=source,
            kind=spec.kind,
            definition=spec.definition(),
            enabled=spec.enabled,
            paused=old.paused if old is not None else False,
            overlap_policy=spec.overlap_policy.value,
            next_run_at=next_run_at,
            run_requested_at=old.run_requested_at if old is not None else None,
            created_at=old.created_at if old is not None else now,
            updated_at=now
            if old is None or old.definition != spec.definition()
            else old.updated_at,
            owner=caller.owner if source is JobSource.RUNTIME else None,
        )
        if old is not None and record == old:
            return False
        store.save_job(conn, record)
        return old is None

    async def put(
        self, spec: JobSpec, source: JobSource = JobSource.RUNTIME, *, caller: JobCaller
    ) -> JobView:
        now = self.clock.now()
        await self.db.write(lambda conn: self._upsert(conn, spec, source, now, caller))
        return await self.get(spec.id, caller=caller)

    async def sync(self, config_jobs: list[JobSpec], builtin_jobs: list[JobSpec]) -> SyncReport:
        """Make the database match the configuration: upsert its jobs, remove dropped ones."""
        now = self.clock.now()
        config_ids = {j.id for j in config_jobs}
        builtins = [j for j in builtin_jobs if j.id not in config_ids]

        def tx(conn: Connection) -> SyncReport:
            added: list[str] = []
            updated: list[str] = []
            for source, specs in ((JobSource.CONFIG, config_jobs), (JobSource.BUILTIN, builtins)):
                for spec in specs:
                    before = store.get_job(conn, spec.id)
                    if self._upsert(conn, spec, source, now):
                        added.append(spec.id)
                    elif before is not None and before != store.get_job(conn, spec.id):
                        updated.append(spec.id)
            removed = store.delete_jobs_of_source_except(conn, JobSource.CONFIG, config_ids)
            removed += store.delete_jobs_of_source_except(
                conn, JobSource.BUILTIN, {j.id for j in builtins}
            )
            return SyncReport(tuple(added), tuple(updated), tuple(removed))

        report = await self.db.write(tx)
        if report.added or report.updated or report.removed:
            log.info(
                "scheduler_config_synced",
                added=list(report.added),
                updated=list(report.updated),
                removed=list(report.removed),
            )
        return report

    async def delete(self, job_id: str, *, caller: JobCaller) -> None:
        def tx(conn: Connection) -> None:
            record = self._require(conn, job_id, caller)
            if record.source is not JobSource.RUNTIME:
                # only admins and the operator get here (JobCaller.may_manage)
                raise JobNotEditable(
                    f"job {job_id!r} is defined in {_owner(record.source)} and would come "
                    "back at the next start; an admin may pause it, or remove it from the "
                    "config file"
                )
            store.delete_job(conn, job_id)

        await self.db.write(tx)

    async def pause(self, job_id: str, *, caller: JobCaller) -> JobView:
        now = self.clock.now()

        def tx(conn: Connection) -> None:
            record = self._require(conn, job_id, caller)
            store.set_paused(conn, job_id, True, record.next_run_at, now)

        await self.db.write(tx)
        return await self.get(job_id, caller=caller)

    async def resume(self, job_id: str, *, caller: JobCaller) -> JobView:
        """Unpause; a recurring job restarts its timing from now (runs missed while paused are dropped)."""
        now = self.clock.now()

        def tx(conn: Connection) -> None:
            record = self._require(conn, job_id, caller)
            if not record.paused:
                return
            next_run_at = record.next_run_at
            spec = parse_job(record.definition)
            schedule = build_schedule(spec.schedule, self.default_zone)
            if not schedule.one_shot:
                next_run_at = schedule.first_fire(now)
            store.set_paused(conn, job_id, False, next_run_at, now)

        await self.db.write(tx)
        return await self.get(job_id, caller=caller)

    async def request_run(self, job_id: str) -> JobView:
        """Ask for one run as soon as the engine sees it (even if the job is paused).
        The operator's (`picobot jobs run`); the tool has no such action."""
        now = self.clock.now()

        def tx(conn: Connection) -> None:
            self._require(conn, job_id, OPERATOR)
            store.set_run_requested(conn, job_id, now)

        await self.db.write(tx)
        return await self.get(job_id, caller=OPERATOR)

    @staticmethod
    def _require(conn: Connection, job_id: str, caller: JobCaller) -> JobRecord:
        record = store.get_job(conn, job_id)
        if record is None or not caller.may_manage(record):
            raise JobNotFound(job_id)
        return record
