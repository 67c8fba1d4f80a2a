"""The console API's frame: each view offers `Route`s; `ConsoleApi` mounts
them under `/api/ops/`, each behind the `Guard` (admins only), and answers
every other `/api/` path with a JSON 404 behind the same guard.

A route that changes something is an action (`Route.action` names it): it is
logged as `console_action` with who did it, what, on what and how it ended,
whatever the outcome. A handler refuses with `ConsoleError` (a clear message
and a status); a body is read with `read_json`, bounded.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

import orjson
import structlog
from aiohttp import web

from gateway.console.guard import Guard, Principal, Refusal
from gateway.web.static import secure

__all__ = [
    "MAX_BODY_BYTES",
    "ConsoleApi",
    "ConsoleError",
    "Handler",
    "Route",
    "View",
    "json_response",
    "principal_of",
    "read_json",
]

log = structlog.get_logger(__name__)

MAX_BODY_BYTES: Final = 64 * 1024
PRINCIPAL_KEY: Final = web.RequestKey("console_principal", Principal)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ConsoleError(Exception):
    """A request the console refuses: `status` and a message for the operator."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True, slots=True)
class Route:
    method: str
    path: str  # under /api/ops, e.g. "/outbox/{row_id:\\d+}/retry"
    handler: Handler
    action: str | None = None  # set for a route that changes something: logged


class View(Protocol):
    def routes(self) -> Sequence[Route]: ...


def json_response(data: Mapping[str, Any], status: int = 200) -> web.StreamResponse:
    return secure(
        web.Response(body=orjson.dumps(data), status=status, content_type="application/json")
    )


def principal_of(request: web.Request) -> Principal:
    """Who made this (guarded) request."""
    return request[PRINCIPAL_KEY]


async def read_json(request: web.Request) -> dict[str, Any]:
    """The request's JSON object; ConsoleError 413 past MAX_BODY_BYTES, 400 if
    it is not one JSON object. An empty body is {}."""
    if (request.content_length or 0) > MAX_BODY_BYTES:
        raise ConsoleError(413, f"the body is over {MAX_BODY_BYTES} bytes")
    body = await request.content.read(MAX_BODY_BYTES + 1)
    if len(body) > MAX_BODY_BYTES:
        raise ConsoleError(413, f"the body is over {MAX_BODY_BYTES} bytes")
    if not body.strip():
        return {}
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ConsoleError(400, f"the body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ConsoleError(400, "the body must be a JSON object")
    return data


class ConsoleApi:
    PREFIX: Final = "/api/ops"

    def __init__(self, guard: Guard, views: Sequence[View]) -> None:
        self.guard = guard
        self.views = views
        self.mounted: list[Route] = []  # every route, for the access tests

    def mount(self, app: web.Application) -> None:
        routes = [Route("GET", "/whoami", self.whoami)]
        routes += [route for view in self.views for route in view.routes()]
        for route in routes:
            app.router.add_route(
                route.method, self.PREFIX + route.path, self._guarded(route.handler, route)
            )
        self.mounted = routes
        app.router.add_route("*", "/api/{tail:.*}", self._guarded(self.not_found))

    def _guarded(self, handler: Handler, route: Route | None = None) -> Handler:
        action = route.action if route is not None else None

        async def guarded(request: web.Request) -> web.StreamResponse:
            who = self.guard.judge(request)
            if isinstance(who, Refusal):
                response = json_response({"error": who.error}, who.status)
                if who.status == 401:
                    response.headers["WWW-Authenticate"] = "Bearer"
                return response
            if not who.admin:
                return json_response({"error": "the console is for admins only"}, 403)
            request[PRINCIPAL_KEY] = who
            status = 500
            try:
                response = await handler(request)
                status = response.status
                return response
            except ConsoleError as exc:
                status = exc.status
                return json_response({"error": exc.message}, exc.status)
            finally:
                if action is not None:
                    log.info(
                        "console_action",
                        action=action,
                        by=who.name,
                        target=dict(request.match_info) or None,
                        status=status,
                    )

        return guarded

    async def whoami(self, request: web.Request) -> web.StreamResponse:
        who = principal_of(request)
        return json_response({"principal": who.name, "admin": who.admin})

    async def not_found(self, request: web.Request) -> web.StreamResponse:
        return json_response({"error": f"no API at {request.path}"}, 404)
