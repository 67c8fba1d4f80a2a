"""The scheduler engine: claims due runs in SQLite and executes them on bounded workers.

Lifecycle: `start()` marks runs left unfinished by a previous process as
interrupted (they are not re-run: at most one execution per fire time), syncs
the config jobs into the database, then starts one engine task and
`max_concurrent_runs` workers; `stop(grace_secs)` stops claiming, lets running
runs finish within the grace period, cancels the rest and marks every run it
abandoned interrupted. `async with Scheduler(...)` does both.

The engine sleeps until the next fire time (rounded up to
`tick_resolution_ms`, capped by `rescan_interval_secs`); `wake()` — called by
every change made through `manage` — makes it look again at once. Each look is
one write transaction that, per due job, decides (planner), inserts the
`job_runs` row unique on (job_id, scheduled_at) and advances `next_run_at`, so
two engines on one database, or overlapping looks, never run a fire time twice.

The gateway is reached only through `SchedulerHost` (`scheduler.host`),
implemented by the composition root. This module must never import channels,
agent or gateway modules other than `gateway.bus`.
"""

from __future__ import annotations

import asyncio
import functools
import math
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any, Final

import structlog

from gateway.bus import NoSuchChannel
from scheduler.admin import JobAdmin, JobNotFound, SchedulerError
from scheduler.builtin import builtin_jobs, register_builtin_events
from scheduler.claims import ClaimedRun, Claimer
from scheduler.clock import Clock, SystemClock
from scheduler.config import SchedulerConfig
from scheduler.events import EventRegistry
from scheduler.host import SchedulerHost
from scheduler.jobs import JobValidationError, SilentAgentTaskJob
from scheduler.manage import check_runtime_job, manage_action, operator_action
from scheduler.owners import JobCaller
from scheduler.runner import execute_job
from storage.database import Database
from storage.sql import jobs as store
from storage.sql.jobs import RunStatus

__all__ = ["ClaimedRun", "Scheduler"]

log = structlog.get_logger(__name__)

_CLAIM_BATCH: Final = 64
_RETRY_AFTER_ERROR: Final = timedelta(seconds=5)
_ERROR_MAX_CHARS: Final = 1000


class Scheduler:
    """Implements `agent.tools.base.SchedulerService` (`manage`)."""

    def __init__(
        self,
        config: SchedulerConfig,
        db: Database,
        host: SchedulerHost,
        *,
        events: EventRegistry | None = None,
        clock: Clock | None = None,
        default_zone: tzinfo = UTC,
        on_run_status: Callable[[str], None] | None = None,
        worker: str | None = None,
    ) -> None:
        """`on_run_status(status)` is told every finished, skipped and missed run (metrics).
        `worker`: this worker's id with several on one database (docs/scale-out.md)."""
        self.config = config
        self.db = db
        self.host = host
        self.clock: Clock = clock or SystemClock()
        self.events = events or EventRegistry()
        self.default_zone = default_zone
        self._on_run_status = on_run_status
        self.admin = JobAdmin(db, clock=self.clock, default_zone=default_zone)
        register_builtin_events(self.events, db, self.clock)
        self._queue: asyncio.Queue[ClaimedRun] = asyncio.Queue(config.worker_queue_capacity)
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._in_flight: dict[int, ClaimedRun] = {}  # claimed by this engine, not finished
        self._running: set[int] = set()  # the subset a worker has started
        self._tasks: list[asyncio.Task[None]] = []
        self._claimer = Claimer(config, default_zone, worker)
        self.worker = worker
        self._state = "new"

    # -- lifecycle ---------------------------------------------------------------
    async def start(self) -> None:
        if self._state != "new":
            raise RuntimeError(f"Scheduler.start() in state {self._state}")
        self._state = "starting"
        now = self.clock.now()
        shared = self.worker is not None  # other workers' runs are theirs, or adopted
        interrupted = await self.db.write(
            lambda c: store.interrupt_unfinished_runs(c, now, unclaimed_only=shared)
        )
        if interrupted:
            log.warning("scheduler_runs_interrupted_by_restart", count=interrupted)
        builtins = builtin_jobs(self.events) if self.config.builtin_jobs else []
        await self.admin.sync(list(self.config.jobs), builtins)
        for spec in self.config.jobs:
            if spec.kind == "internal_event" and spec.payload.event not in self.events:
                log.warning(
                    "scheduler_event_without_handler", job_id=spec.id, event_name=spec.payload.event
                )
        self._tasks.append(asyncio.create_task(self._engine(), name="scheduler-engine"))
        for index in range(self.config.max_concurrent_runs):
            self._tasks.append(
                asyncio.create_task(self._worker(), name=f"scheduler-worker-{index}")
            )
        self._state = "running"
        log.debug("scheduler_started", workers=self.config.max_concurrent_runs)

    @property
    def running(self) -> bool:
        """Started, not stopped, and no engine or worker task has died."""
        return self._state == "running" and not any(t.done() for t in self._tasks)

    async def stop(self, grace_secs: float = 0.0) -> None:
        """Stop claiming; give running runs `grace_secs` to finish, then cancel them.

        Claimed runs that never started, and runs cancelled here, are recorded as
        interrupted (they are not re-run later). Idempotent.
        """
        if self._state in ("new", "stopped") or not self._tasks:  # never started, or failed to
            self._state = "stopped"
            return
        self._state = "stopped"
        engine, workers = self._tasks[0], self._tasks[1:]
        engine.cancel()
        await asyncio.gather(engine, return_exceptions=True)
        abandoned = [run_id for run_id in self._in_flight if run_id not in self._running]
        for run_id in abandoned:
            del self._in_flight[run_id]
        if not self._in_flight:
            self._idle.set()
        elif grace_secs > 0:
            try:
                async with asyncio.timeout(grace_secs):
                    await self._idle.wait()
            except TimeoutError:
                log.warning("scheduler_runs_cut_short", count=len(self._in_flight))
        for task in workers:
            task.cancel()
        results = await asyncio.gather(*workers, return_exceptions=True)
        for task, result in zip(workers, results, strict=True):
            if isinstance(result, Exception):
                log.error("scheduler_task_crashed", task=task.get_name(), error=repr(result))
        self._tasks.clear()
        abandoned += list(self._in_flight)
        if abandoned:
            now = self.clock.now()
            await self.db.write(lambda c: store.interrupt_unfinished_runs(c, now, abandoned))
        self._in_flight.clear()
        self._running.clear()
        self._idle.set()
        log.debug("scheduler_stopped", abandoned=len(abandoned))

    async def __aenter__(self) -> Scheduler:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def wake(self) -> None:
        """Look at the database again now (jobs changed)."""
        self._wake.set()

    async def wait_idle(self) -> None:
        """Return once no claimed run is queued or running."""
        await self._idle.wait()

    # -- management (SchedulerService) ------------------------------------------------
    async def manage(
        self, action: str, payload: Mapping[str, Any], *, channel: str, sender_id: str, admin: bool
    ) -> dict[str, Any]:
        """list | get | put | delete | pause | resume for the sender `sender_id` on
        `channel` (an admin reaches every job, a user only their own); errors come
        back as {"ok": False, "error"}."""
        try:
            result = await manage_action(
                self.admin,
                action,
                payload,
                caller=JobCaller.sender(channel, sender_id, admin=admin),
                zone=self.default_zone,
                check=lambda spec: check_runtime_job(spec, self.clock.now(), self.default_zone),
            )
        except (SchedulerError, JobValidationError) as exc:
            return {"ok": False, "error": str(exc)}
        if action in ("put", "delete", "pause", "resume"):
            self.wake()
        return result

    async def operate(self, action: str, job_id: str) -> dict[str, Any]:
        """The operator's pause | resume | run | delete of one job, as `picobot jobs`
        does it (`operator_action`), then a look at the database at once (a run
        asked for starts now). {"ok": True, "job": the job or None once deleted};
        a refusal is {"ok": False, "error", "found"} (`found` False: no such job)."""
        try:
            view = await operator_action(self.admin, action, job_id)
        except SchedulerError as exc:
            return {"ok": False, "error": str(exc), "found": not isinstance(exc, JobNotFound)}
        self.wake()
        return {"ok": True, "job": None if view is None else view.to_dict(self.default_zone)}

    # -- engine ----------------------------------------------------------------------
    async def _engine(self) -> None:
        while True:
            self._wake.clear()
            now = self.clock.now()
            limit = max(1, min(_CLAIM_BATCH, self._queue.maxsize - self._queue.qsize()))
            try:
                batch = await self.db.write(
                    functools.partial(self._claimer.claim, now=now, limit=limit)
                )
            except Exception:
                log.exception("scheduler_claim_failed")
                await self.clock.sleep_until(now + _RETRY_AFTER_ERROR, self._wake)
                continue
            for status in batch.noted:
                self._observe(status)
            for run in batch.claimed:
                self._in_flight[run.run_id] = run
                self._idle.clear()
            for run in batch.claimed:
                await self._queue.put(run)
            if batch.more:
                continue
            await self.clock.sleep_until(self._wake_time(batch.next_due, now), self._wake)

    def _wake_time(self, next_due: datetime | None, now: datetime) -> datetime | None:
        deadline = None
        if next_due is not None:
            tick = self.config.tick_resolution_ms / 1000
            stamp = math.ceil(next_due.timestamp() / tick) * tick
            deadline = datetime.fromtimestamp(stamp, UTC)
            if deadline < next_due:
                deadline += timedelta(seconds=tick)
        if self.config.rescan_interval_secs > 0:
            cap = now + timedelta(seconds=self.config.rescan_interval_secs)
            deadline = cap if deadline is None else min(deadline, cap)
        return deadline

    # -- workers ------------------------------------------------------------------------
    async def _worker(self) -> None:
        while True:
            run = await self._queue.get()
            if run.run_id not in self._in_flight:
                continue  # given back by stop()
            self._running.add(run.run_id)
            try:
                await self._execute(run)
            except Exception:  # storage failed around the run; the job itself was handled
                log.exception("scheduler_run_bookkeeping_failed", job_id=run.job_id)
            self._running.discard(run.run_id)
            self._in_flight.pop(run.run_id, None)
            if not self._in_flight:
                self._idle.set()

    async def _execute(self, run: ClaimedRun) -> None:
        spec = run.spec
        bound = log.bind(job_id=spec.id, run_id=run.run_id, kind=spec.kind)
        started = self.clock.now()
        await self.db.write(lambda c: store.mark_run_started(c, run.run_id, started))
        timeout = spec.timeout_secs or self.config.run_timeout_secs
        status, error = RunStatus.SUCCEEDED, None
        began = time.monotonic()
        deadline = asyncio.timeout(timeout)
        try:
            async with deadline:
                await execute_job(
                    spec,
                    run.scheduled_at,
                    started,
                    host=self.host,
                    events=self.events,
                    max_run_tokens=self.config.max_run_tokens,
                )
        except TimeoutError as exc:
            if deadline.expired():
                status, error = RunStatus.TIMED_OUT, f"timed out after {timeout:g}s"
            else:
                status, error = RunStatus.FAILED, _describe(exc)
        except NoSuchChannel as exc:  # the config's doing: one line below, no traceback
            status, error = RunStatus.FAILED, str(exc)
        except Exception as exc:
            status, error = RunStatus.FAILED, _describe(exc)
            bound.exception("scheduled_run_error")
        duration_ms = int((time.monotonic() - began) * 1000)
        if status is RunStatus.SUCCEEDED:
            bound.info("scheduled_run_finished", duration_ms=duration_ms, cause=run.cause.value)
        else:
            bound.warning("scheduled_run_failed", status=status.value, error=error)
            if status is RunStatus.TIMED_OUT and isinstance(spec, SilentAgentTaskJob):
                await self._notify_failure(spec)
        finished = self.clock.now()
        keep = self.config.history_per_job
        await self.db.write(
            lambda c: store.finish_run(
                c, run.run_id, status, finished, duration_ms, error, keep_history=keep
            )
        )
        self._observe(status)

    def _observe(self, status: RunStatus) -> None:
        if self._on_run_status is not None:
            try:
                self._on_run_status(status.value)
            except Exception:
                log.exception("scheduler_observer_failed")

    async def _notify_failure(self, spec: SilentAgentTaskJob) -> None:
        """The pipeline reports a silent task's own failures; a timeout is ours to report."""
        try:
            await self.host.notify_failure(spec.target.channel, spec.target.chat_id, spec.id)
        except Exception:
            log.exception("scheduler_failure_notice_failed", job_id=spec.id)


def _describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return text[:_ERROR_MAX_CHARS]
