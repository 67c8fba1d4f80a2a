"""picobot as an MCP server (docs/mcp-server.md): `/mcp` on the gateway,
streamable HTTP through the official `mcp` SDK, stateless, JSON responses.

Same keys as the API (`Authorization: Bearer`, channels/api/channel.py), and
the same conversations: a session named here is the API's
`X-Picobot-Session` of that key. The tools:

- `send_message(text, session="default", agent=None)`: a message to the
  agent in that session, through the durable inbox like an API request; the
  agent's reply.
- `list_sessions()`: the caller's sessions.
- `read_history(session="default", limit=20)`: the newest messages of one.

The SDK runs as an ASGI app; aiohttp hands it each request (`_asgi`) after
the key was checked, and the tools identify the caller again from the
request's headers (the SDK runs them in its own tasks). `picobot mcp serve`
(gateway/cli/mcp.py) offers the same tools over stdio by relaying to
this endpoint.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import structlog
from aiohttp import web
from multidict import CIMultiDict

from channels.api.wire import BadRequest, check_session, read_body
from channels.base import ChatDirectory, ReplyArchive
from channels.tasks import cancel_and_wait
from channels.ws_input import Identity

__all__ = ["McpEndpoint"]

log = structlog.get_logger(__name__)

MAX_BODY_BYTES = 1_000_000
HISTORY_MAX = 200

_SESSION = {"type": "string", "description": "the session (X-Picobot-Session of the API)"}
TOOLS: list[dict[str, Any]] = [
    {
        "name": "send_message",
        "description": "Send a message to the picobot agent in a session and wait for its reply.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "text": {"type": "string", "description": "the message"},
                "session": {**_SESSION, "default": "default"},
                "agent": {"type": "string", "description": "an agent's name; default the API's"},
            },
            "required": ["text"],
        },
    },
    {
        "name": "list_sessions",
        "description": "The caller's picobot sessions.",
        "inputSchema": {"type": "object", "properties": {}},
    },
    {
        "name": "read_history",
        "description": "The newest messages of one of the caller's sessions.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "session": {**_SESSION, "default": "default"},
                "limit": {"type": "integer", "minimum": 1, "maximum": HISTORY_MAX, "default": 20},
            },
        },
    },
]


class Asker(Protocol):
    """The channel the tools send messages through (channels.api.channel.ApiChannel)."""

    name: str

    async def ask(
        self, identity: Identity, session: str, text: str, agent: str | None = None
    ) -> str: ...


class McpEndpoint:
    def __init__(
        self,
        channel: Asker,
        identify: Callable[[Mapping[str, str], str | None], Identity | None],
    ) -> None:
        """`identify(headers, peer address)`: who a request is, None: nobody."""
        self.channel = channel
        self.identify = identify
        self.archive: ReplyArchive | None = None
        self.directory: ChatDirectory | None = None
        self._manager: Any = None
        self._server: Any = None
        self._task: asyncio.Task[None] | None = None
        self._running = asyncio.Event()
        self._stop = asyncio.Event()

    # -- lifecycle -----------------------------------------------------------------------
    async def start(self) -> None:
        """The SDK's session manager, running until `stop` (imported only now)."""
        from mcp.server.lowlevel import Server
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

        self._server = Server("picobot")
        self._register(self._server)
        self._manager = StreamableHTTPSessionManager(
            app=self._server, json_response=True, stateless=True
        )
        self._task = asyncio.create_task(self._run(), name="mcp-endpoint")
        await _either(self._running, self._task)
        if self._task.done():
            self._task.result()  # it failed to start: say why

    async def _run(self) -> None:
        async with self._manager.run():
            self._running.set()
            await self._stop.wait()

    async def stop(self) -> None:
        self._stop.set()
        await cancel_and_wait(self._task)

    # -- HTTP ----------------------------------------------------------------------------
    async def handle(self, request: web.Request) -> web.StreamResponse:
        if self.identify(request.headers, request.remote) is None:
            return web.json_response(
                {"error": "a valid API key is required: Authorization: Bearer <key>"}, status=401
            )
        if not self._running.is_set() or self._stop.is_set():
            return web.json_response({"error": "the MCP endpoint is not running"}, status=503)
        try:
            body = await read_body(request, MAX_BODY_BYTES)
        except BadRequest as exc:
            return web.json_response({"error": str(exc)}, status=exc.status)
        return await _asgi(self._manager.handle_request, request, body)

    # -- tools ---------------------------------------------------------------------------
    def _register(self, server: Any) -> None:
        from mcp import types

        @server.list_tools()  # type: ignore[untyped-decorator]
        async def list_tools() -> list[types.Tool]:
            return [types.Tool(**tool) for tool in TOOLS]

        @server.call_tool()  # type: ignore[untyped-decorator]
        async def call_tool(name: str, arguments: dict[str, Any]) -> list[types.TextContent]:
            request = server.request_context.request
            identity = self.identify(
                request.headers, request.client.host if request.client else None
            )
            if identity is None:
                raise PermissionError("a valid API key is required")
            text = await self.call(identity, name, arguments)
            return [types.TextContent(type="text", text=text)]

    async def call(self, identity: Identity, name: str, arguments: Mapping[str, Any]) -> str:
        """One tool call for `identity`; raises ValueError (the caller's mistake)."""
        try:
            if name == "send_message":
                text = arguments.get("text")
                if not isinstance(text, str) or not text.strip():
                    raise ValueError("send_message needs a non-empty 'text'")
                agent = arguments.get("agent")
                return await self.channel.ask(
                    identity, _session(arguments), text, agent if isinstance(agent, str) else None
                )
            if name == "list_sessions":
                return json.dumps(await self._sessions(identity))
            if name == "read_history":
                return json.dumps(await self._history(identity, arguments), ensure_ascii=False)
        except BadRequest as exc:
            raise ValueError(str(exc)) from None
        raise ValueError(f"no tool named {name!r}")

    async def _sessions(self, identity: Identity) -> list[str]:
        if self.archive is None:
            return []
        prefix = f"{identity.principal}/"
        return [chat[len(prefix) :] for chat in await self.archive.chats(self.channel.name, prefix)]

    async def _history(self, identity: Identity, arguments: Mapping[str, Any]) -> dict[str, Any]:
        limit = arguments.get("limit", 20)
        if not isinstance(limit, int) or not 1 <= limit <= HISTORY_MAX:
            raise ValueError(f"'limit' must be a whole number from 1 to {HISTORY_MAX}")
        session = _session(arguments)
        found = None
        if self.directory is not None:
            found = await self.directory.history(f"{identity.principal}/{session}", None, limit)
        entries = [] if found is None else found.entries
        return {
            "session": session,
            "messages": [{"role": e.role, "text": e.text, "at": e.created_at} for e in entries],
            "more": bool(found and found.more),
        }


def _session(arguments: Mapping[str, Any]) -> str:
    session = arguments.get("session", "default")
    if not isinstance(session, str):
        raise ValueError("'session' must be a string")
    return check_session(session, "session")


async def _either(event: asyncio.Event, task: asyncio.Task[None]) -> None:
    waiting = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait({waiting, task}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not waiting.done():
            waiting.cancel()
            await asyncio.gather(waiting, return_exceptions=True)


async def _asgi(app: Any, request: web.Request, body: bytes) -> web.StreamResponse:
    """Run one request through the ASGI callable `app`: its body already read
    (and capped), its response written back as it comes."""
    peer = request.transport.get_extra_info("peername") if request.transport else None
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": f"{request.version.major}.{request.version.minor}",
        "method": request.method,
        "scheme": request.scheme,
        "path": request.path,
        "raw_path": request.raw_path.encode(),
        "root_path": "",
        "query_string": request.query_string.encode(),
        "headers": [
            (k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in request.headers.items()
        ],
        "client": (peer[0], peer[1]) if isinstance(peer, tuple) else None,
        "server": None,
    }
    done = asyncio.Event()
    given = False
    response: web.StreamResponse | None = None

    async def receive() -> dict[str, Any]:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal response
        if message["type"] == "http.response.start":
            headers = CIMultiDict(
                (k.decode("latin-1"), v.decode("latin-1")) for k, v in message.get("headers", [])
            )
            response = web.StreamResponse(status=message["status"], headers=headers)
            await response.prepare(request)
        elif message["type"] == "http.response.body" and response is not None:
            await response.write(message.get("body", b""))
            if not message.get("more_body", False):
                await response.write_eof()

    try:
        await app(scope, receive, send)
    finally:
        done.set()
    if response is None:
        return web.json_response({"error": "no response"}, status=500)
    return response
