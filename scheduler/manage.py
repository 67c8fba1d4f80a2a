"""The `manage` actions behind the scheduler_manage tool: list, get, put, delete, pause, resume;
and the operator's actions on one job (`picobot jobs` and the console): pause, resume, run, delete.

Every failure the caller can fix raises `SchedulerError` or
`JobValidationError` with a message that says what was wrong; the service
turns those into `{"ok": False, "error": ...}` for the model. Every action
acts for a `JobCaller` (scheduler.owners): a user reaches only their own jobs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, tzinfo
from typing import Any

from scheduler.admin import JobAdmin, JobView, SchedulerError
from scheduler.jobs import (
    AtSchedule,
    InternalEventJob,
    IntervalSchedule,
    JobSpec,
    JobValidationError,
    parse_job,
)
from scheduler.owners import OPERATOR, JobCaller
from scheduler.schedules import build_schedule

__all__ = ["ACTIONS", "OPERATOR_ACTIONS", "check_runtime_job", "manage_action", "operator_action"]

ACTIONS = ("list", "get", "put", "delete", "pause", "resume")
OPERATOR_ACTIONS = ("pause", "resume", "run", "delete")
# A model that asks for a job every second would flood a chat and burn tokens.
MIN_RUNTIME_INTERVAL = 60


def check_runtime_job(spec: JobSpec, now: datetime, zone: tzinfo) -> None:
    """Rules for jobs created at run time, on top of the definition's own validation."""
    if isinstance(spec, InternalEventJob):
        raise JobValidationError(
            spec.id,
            [("kind", "internal_event jobs can only be defined in the configuration file")],
        )
    if isinstance(spec.schedule, IntervalSchedule) and spec.schedule.seconds < MIN_RUNTIME_INTERVAL:
        raise JobValidationError(
            spec.id,
            [
                (
                    "schedule.seconds",
                    f"jobs created at run time repeat at most every {MIN_RUNTIME_INTERVAL}s",
                )
            ],
        )
    if isinstance(spec.schedule, AtSchedule):
        at = build_schedule(spec.schedule, zone).first_fire(now)
        if at <= now:
            raise JobValidationError(
                spec.id,
                [
                    (
                        "schedule.at",
                        f"{at.astimezone(zone).isoformat(timespec='seconds')} is in the past "
                        f"(now is {now.astimezone(zone).isoformat(timespec='seconds')})",
                    )
                ],
            )


def _job_id(payload: Mapping[str, Any]) -> str:
    job_id = payload.get("job_id")
    if not isinstance(job_id, str) or not job_id:
        raise SchedulerError("job_id is required for this action")
    return job_id


async def manage_action(
    admin: JobAdmin,
    action: str,
    payload: Mapping[str, Any],
    *,
    caller: JobCaller,
    zone: tzinfo,
    check: Callable[[JobSpec], None],
) -> dict[str, Any]:
    match action:
        case "list":
            views = await admin.list_jobs(caller=caller)
            return {"ok": True, "jobs": [v.to_dict(zone) for v in views]}
        case "get":
            view = await admin.get(_job_id(payload), caller=caller)
            return {"ok": True, "job": view.to_dict(zone, full=True)}
        case "put":
            raw = payload.get("job")
            if not isinstance(raw, Mapping):
                raise SchedulerError("put needs `job`: the job definition as an object")
            spec = parse_job(dict(raw))
            check(spec)
            view = await admin.put(spec, caller=caller)
            return {"ok": True, "job": view.to_dict(zone)}
        case "delete":
            job_id = _job_id(payload)
            await admin.delete(job_id, caller=caller)
            return {"ok": True, "deleted": job_id}
        case "pause":
            view = await admin.pause(_job_id(payload), caller=caller)
            return {"ok": True, "job": view.to_dict(zone)}
        case "resume":
            view = await admin.resume(_job_id(payload), caller=caller)
            return {"ok": True, "job": view.to_dict(zone)}
    raise SchedulerError(f"unknown action {action!r}; use one of: {', '.join(ACTIONS)}")


async def operator_action(admin: JobAdmin, action: str, job_id: str) -> JobView | None:
    """The operator's `action` on one job, any job (`picobot jobs pause|resume|run|delete`,
    the console): the job as it is now, None once deleted. A config or built-in job
    cannot be deleted (JobNotEditable: it would come back at the next start)."""
    match action:
        case "pause":
            return await admin.pause(job_id, caller=OPERATOR)
        case "resume":
            return await admin.resume(job_id, caller=OPERATOR)
        case "run":
            return await admin.request_run(job_id)
        case "delete":
            await admin.delete(job_id, caller=OPERATOR)
            return None
    raise SchedulerError(f"unknown action {action!r}; use one of: {', '.join(OPERATOR_ACTIONS)}")
