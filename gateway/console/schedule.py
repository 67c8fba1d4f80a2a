"""The scheduled jobs view: every job as `picobot jobs list --json` shows it,
and the operator's actions on one job: pause, resume, run now, delete.

The actions go through the running scheduler's `operate`, which is
`picobot jobs pause|resume|run|delete` (scheduler.manage.operator_action)
followed by a look at the database at once, so a run asked for starts now.
The CLI's rules hold: a config or built-in job cannot be deleted (it would
come back at the next start; pause it instead), 409. With the scheduler off
(`scheduler.enabled: false`) the jobs are shown and every action is refused
with 409 (`picobot jobs` still works on the database).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from aiohttp import web

from gateway.console.api import ConsoleError, Route, json_response
from gateway.ops.logging import redact_text

__all__ = ["JOB_ID", "JobsControl", "JobsReader", "ScheduleView"]

JobsReader = Callable[[], Awaitable[Sequence[Mapping[str, Any]]]]
# scheduler.jobs.JOB_ID_PATTERN ("/" included: a job id may hold one)
JOB_ID: Final = r"{job_id:[A-Za-z0-9][A-Za-z0-9._:/@-]*}"
SCHEDULER_OFF: Final = (
    "the scheduler is off (scheduler.enabled: false); `picobot jobs` works on the database"
)


class JobsControl(Protocol):
    """What this view uses of scheduler.service.Scheduler."""

    @property
    def running(self) -> bool: ...

    async def operate(self, action: str, job_id: str) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class ScheduleView:
    jobs_view: JobsReader
    scheduler: JobsControl | None = None  # None: scheduler.enabled is false

    def routes(self) -> Sequence[Route]:
        return [
            Route("GET", "/jobs", self.jobs),
            Route("POST", f"/jobs/{JOB_ID}/pause", self.pause, action="jobs.pause"),
            Route("POST", f"/jobs/{JOB_ID}/resume", self.resume, action="jobs.resume"),
            Route("POST", f"/jobs/{JOB_ID}/run", self.run, action="jobs.run"),
            Route("DELETE", f"/jobs/{JOB_ID}", self.delete, action="jobs.delete"),
        ]

    async def jobs(self, _request: web.Request) -> web.StreamResponse:
        if self.scheduler is None:
            state = "off"
        else:
            state = "running" if self.scheduler.running else "stopped"
        return json_response(
            {"scheduler": state, "jobs": [_shown(j) for j in await self.jobs_view()]}
        )

    async def pause(self, request: web.Request) -> web.StreamResponse:
        return await self._operate(request, "pause")

    async def resume(self, request: web.Request) -> web.StreamResponse:
        return await self._operate(request, "resume")

    async def run(self, request: web.Request) -> web.StreamResponse:
        return await self._operate(request, "run")

    async def delete(self, request: web.Request) -> web.StreamResponse:
        return await self._operate(request, "delete")

    async def _operate(self, request: web.Request, action: str) -> web.StreamResponse:
        if self.scheduler is None:
            raise ConsoleError(409, SCHEDULER_OFF)
        job_id = request.match_info["job_id"]
        result = await self.scheduler.operate(action, job_id)
        if not result.get("ok"):
            status = 409 if result.get("found", True) else 404
            raise ConsoleError(status, str(result.get("error") or f"cannot {action} {job_id!r}"))
        job = result.get("job")
        if job is None:
            return json_response({"deleted": job_id})
        return json_response({"job": _shown(job)})


def _shown(job: Mapping[str, Any]) -> dict[str, Any]:
    """A job as the page gets it: a last run's error without secrets."""
    shown = dict(job)
    last = shown.get("last_run")
    if isinstance(last, Mapping) and last.get("error"):
        shown["last_run"] = {**last, "error": redact_text(str(last["error"]))}
    return shown
