"""The operator API under `/api/ops/`: views of data the gateway already has —
the outbox (with retry of a failed row), the scheduled jobs, and channel
readiness — for the web UI's operator pages. Never a second source of truth.

Every `/api/` path, known or not, needs `gateway.auth_token` (when one is
set) as `Authorization: Bearer …`, compared in constant time; a request from
a browser page of another origin is refused whatever it carries. Without a
token the API answers only a gateway bound to loopback (whoever reaches that
is the local operator); bound beyond loopback it refuses every request until
`gateway.auth_token` is set.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from channels.base import origin_allowed
from gateway.web.static import secure
from storage.store import Store

__all__ = ["OpsApi"]

PREVIEW_CHARS = 200
NEEDS_TOKEN = (
    "the operator API needs gateway.auth_token when gateway.host is not a loopback address"
)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# the scheduled jobs as `picobot jobs list --json` shows them
JobsView = Callable[[], Awaitable[Sequence[Mapping[str, object]]]]


def _json(data: dict[str, Any], status: int = 200) -> web.StreamResponse:
    return secure(web.json_response(data, status=status))


@dataclass(slots=True)
class OpsApi:
    store: Store
    token: str | None
    checks: Callable[[], list[tuple[str, str | None]]]  # readiness probes by name
    wake: Callable[[str], None]  # tell a channel's outbox sender to look again
    jobs_view: JobsView
    allowed_origins: tuple[str, ...] = ()
    exposed: bool = False  # gateway.host is not a loopback address

    def mount(self, app: web.Application) -> None:
        guard = self._guarded
        app.router.add_get("/api/ops/outbox", guard(self.outbox))
        app.router.add_post(r"/api/ops/outbox/{row_id:\d+}/retry", guard(self.retry))
        app.router.add_get("/api/ops/jobs", guard(self.jobs))
        app.router.add_get("/api/ops/channels", guard(self.channels))
        app.router.add_route("*", "/api/{tail:.*}", guard(self.not_found))

    def _guarded(self, handler: Handler) -> Handler:
        async def guarded(request: web.Request) -> web.StreamResponse:
            if not origin_allowed(request, self.allowed_origins):
                return _json({"error": "cross-origin request refused"}, 403)
            if self.token is None and self.exposed:
                return _json({"error": NEEDS_TOKEN}, 403)
            if self.token is not None and not self._authorized(request):
                response = _json({"error": "unauthorized"}, 401)
                response.headers["WWW-Authenticate"] = "Bearer"
                return response
            return await handler(request)

        return guarded

    def _authorized(self, request: web.Request) -> bool:
        assert self.token is not None
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(
            given.strip().encode(), self.token.encode()
        )

    async def not_found(self, request: web.Request) -> web.StreamResponse:
        return _json({"error": f"no API at {request.path}"}, 404)

    async def outbox(self, request: web.Request) -> web.StreamResponse:
        failed_only = request.query.get("failed") in ("1", "true")
        rows = await self.store.outbox_rows(failed_only=failed_only, limit=200)
        counts = await self.store.outbox_counts()
        return _json(
            {
                "counts": counts,
                "rows": [
                    {
                        "id": r.id,
                        "channel": r.channel,
                        "chat_id": r.chat_id,
                        "state": r.state.value,
                        "attempts": r.attempts,
                        "last_error": r.last_error,
                        "created_at": r.created_at,
                        "preview": r.text[:PREVIEW_CHARS],
                    }
                    for r in rows
                ],
            }
        )

    async def retry(self, request: web.Request) -> web.StreamResponse:
        row_id = int(request.match_info["row_id"])
        channel = await self.store.retry_outbox(row_id)
        if channel is None:
            return _json({"error": f"outbox row {row_id} is not failed or parked"}, 409)
        self.wake(channel)
        return _json({"retried": row_id})

    async def jobs(self, _request: web.Request) -> web.StreamResponse:
        return _json({"jobs": list(await self.jobs_view())})

    async def channels(self, _request: web.Request) -> web.StreamResponse:
        checks = self.checks()
        return _json(
            {
                "ready": all(reason is None for _, reason in checks),
                "checks": [{"name": n, "ok": r is None, "reason": r} for n, r in checks],
            }
        )
