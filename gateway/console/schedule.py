"""The scheduled jobs view: every job as `picobot jobs list --json` shows it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from aiohttp import web

from gateway.console.api import Route, json_response

__all__ = ["JobsReader", "ScheduleView"]

JobsReader = Callable[[], Awaitable[Sequence[Mapping[str, object]]]]


@dataclass(frozen=True, slots=True)
class ScheduleView:
    jobs_view: JobsReader

    def routes(self) -> Sequence[Route]:
        return [Route("GET", "/jobs", self.jobs)]

    async def jobs(self, _request: web.Request) -> web.StreamResponse:
        return json_response({"jobs": list(await self.jobs_view())})
