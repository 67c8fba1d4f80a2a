"""The gateway's aiohttp application: /health, /ready, /metrics; channels mount
their own routes (/ws, /webhooks/...) through `AppMount`.

Every request whose `Host` names no host the gateway serves (`ServedHosts`:
loopback, `gateway.host`, `gateway.public_hosts`, `gateway.public_url`) is
answered 421 before any handler runs, a missing `Host` too: a DNS-rebinding
page never reaches /ws, /api/, a webhook or the web UI. Only /health and
/ready, which reveal nothing, answer whatever the `Host` (a load balancer or
a container health check may probe by IP address).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import hdrs, web
from aiohttp.typedefs import Middleware

from channels.base import SERVED_HOSTS, Handler, ServedHosts

__all__ = ["AppMount", "HttpProbes", "build_http_app", "host_guard"]

VERSION = "0.1.0"
MAX_BODY_BYTES = 2 * 1024 * 1024
PROBES = frozenset({"/health", "/ready"})  # answered whatever the Host
MISDIRECTED = (
    "421 misdirected request: this gateway does not serve that host name "
    "(gateway.public_hosts lists the names it serves)\n"
)


@dataclass(slots=True)
class HttpProbes:
    """What the probes read from the running gateway."""

    readiness: Callable[[], list[str]]  # reasons the gateway is not ready; [] = ready
    metrics: Callable[[], Awaitable[tuple[bytes, str]]]  # (body, content type)
    # More of the /ready body that never decides readiness (e.g. each MCP server's state).
    details: Callable[[], dict[str, object]] = dict


class AppMount:
    def __init__(self, app: web.Application) -> None:
        self.app = app

    def add_route(self, method: str, path: str, handler: Handler) -> None:
        self.app.router.add_route(method, path, handler)


def host_guard(served: ServedHosts) -> Middleware:
    """Refuse (421) a request for a host name the gateway does not serve."""

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in PROBES or served.serves(request.headers.get(hdrs.HOST)):
            return await handler(request)
        return web.Response(status=421, text=MISDIRECTED)

    return guard


def build_http_app(probes: HttpProbes, served: ServedHosts) -> web.Application:
    app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=[host_guard(served)])
    app[SERVED_HOSTS] = served  # what channels.base.origin_allowed compares an Origin with
    started = time.monotonic()

    async def health(_request: web.Request) -> web.Response:
        # answering at all proves the event loop is responsive
        return web.json_response(
            {
                "status": "ok",
                "version": VERSION,
                "uptime_secs": round(time.monotonic() - started, 1),
            }
        )

    async def ready(_request: web.Request) -> web.Response:
        reasons = probes.readiness()
        details = probes.details()
        if reasons:
            return web.json_response(
                {"status": "not_ready", "reasons": reasons, **details}, status=503
            )
        return web.json_response({"status": "ready", **details})

    async def metrics(_request: web.Request) -> web.Response:
        body, content_type = await probes.metrics()
        response = web.Response(body=body)
        response.headers["Content-Type"] = content_type
        return response

    app.router.add_get("/health", health)
    app.router.add_get("/ready", ready)
    app.router.add_get("/metrics", metrics)
    return app
