"""One MCP server, supervised: connect, list tools, serve calls, reconnect — forever.

`McpServer.run` is the supervisor task. Each attempt opens the transport and
an SDK `ClientSession`, initialises, lists the tools (all pages), and is then
*up* until the connection is lost, a ping fails or the gateway stops. Then it
waits with capped exponential backoff (`Backoff`: 1 s doubling to 60 s; the
count restarts after a connection that stayed up that long) and tries again —
also when the very first attempt failed. Tools are listed again on every
connect and on `notifications/tools/list_changed`.

Calls run in the caller's task and race the connection's `dead` event, so a
server that drops mid-call ends the call at once with `McpUnavailable`
instead of leaving it waiting for its timeout. A call given up — the turn
was stopped (/stop, shutdown) or it timed out — is cancelled at the server
too, with `notifications/cancelled` naming its request id: the SDK sends
none of its own.

Tools the server marks task-only (`execution.taskSupport: "required"`)
cannot be called with a plain `tools/call`, which is all picobot sends; they
are left out (`left_out`, logged once per change). The supervisor itself never
raises out of `run` (a bug in one server's handling must not take the
gateway's TaskGroup down) except for cancellation.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Sequence
from contextlib import AsyncExitStack
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import Any, Final, TypeVar

import anyio
import structlog
from mcp import ClientSession, McpError, types
from mcp.client.session import MessageHandlerFnT
from mcp.shared.session import RequestResponder

from agent.mcp.config import McpServerConfig, McpTransport
from agent.mcp.errors import ConnectionLost, McpCallFailed, McpUnavailable, describe
from agent.mcp.transport import StderrTail, open_transport

__all__ = [
    "DEFAULT_BACKOFF",
    "TASK_ONLY",
    "Backoff",
    "McpServer",
    "ServerState",
    "ServerStatus",
    "task_only",
]

log = structlog.get_logger(__name__)

T = TypeVar("T")

CLIENT_INFO: Final = types.Implementation(name="picobot", version="0.1.0")
_MAX_PAGES: Final = 100  # of tools/list: a server that pages forever is cut off here
_SESSION_GONE: Final = 32600  # what the SDK's HTTP transport answers for an expired session
_REQUEST_TIMEOUT: Final = 408  # what the SDK raises when a request times out
_CANCEL_SEND_SECS: Final = (
    2.0  # a notifications/cancelled that cannot be written by then is dropped
)
TASK_ONLY: Final = "the server runs it only as a task (execution.taskSupport: required)"


class ServerState(StrEnum):
    CONNECTING = "connecting"
    UP = "up"
    DOWN = "down"  # waiting to retry
    STOPPED = "stopped"


@dataclass(frozen=True, slots=True)
class Backoff:
    base_secs: float = 1.0
    max_secs: float = 60.0

    def delay(self, failures: int) -> float:
        return min(self.max_secs, self.base_secs * 2.0 ** min(failures, 32))


DEFAULT_BACKOFF: Final = Backoff()


@dataclass(frozen=True, slots=True)
class ServerStatus:
    """A server as /ready, /metrics and `picobot mcp list` show it."""

    key: str
    name: str
    transport: McpTransport
    state: ServerState
    tools: int
    error: str | None = None
    retry_in_secs: float | None = None

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "name": self.name,
            "transport": str(self.transport),
            "state": str(self.state),
            "tools": self.tools,
        }
        if self.error is not None:
            out["error"] = self.error
        if self.retry_in_secs is not None:
            out["retry_in_secs"] = round(self.retry_in_secs, 1)
        return out


class _Interrupted(Exception):
    """An event ended the wait before the work finished."""


async def _race(work: Coroutine[Any, Any, T], events: Sequence[asyncio.Event], name: str) -> T:
    """`work`'s result, unless one of `events` is set first: then `work` is
    cancelled and `_Interrupted` raised. `work`'s own exceptions propagate."""
    task = asyncio.create_task(work, name=name)
    waiters = [asyncio.create_task(e.wait(), name=f"{name}:event") for e in events]
    try:
        await asyncio.wait([task, *waiters], return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
        if not task.done():
            task.cancel()
        await asyncio.wait([task, *waiters])
    if task.cancelled():
        raise _Interrupted
    return task.result()


class _Link:
    """What one connection's parts tell its supervisor and its callers."""

    def __init__(self, on_lost: Callable[[str], None]) -> None:
        self._on_lost = on_lost
        self.wake = asyncio.Event()  # something for the supervisor to look at
        self.dead = asyncio.Event()  # lost or closed: calls stop waiting
        self.lost_reason: str | None = None
        self.refresh = False  # tools/list_changed arrived
        self.check = False  # a ping is due

    def lost(self, reason: str) -> None:
        if self.lost_reason is None and not self.dead.is_set():
            self.lost_reason = reason
            self._on_lost(reason)
        self.dead.set()
        self.wake.set()

    def request(self, *, refresh: bool = False, check: bool = False) -> None:
        self.refresh |= refresh
        self.check |= check
        self.wake.set()


# The request id of the call in progress, written by `_Session.send_request`
# into the holder that `McpServer.call` set for its call's task.
_REQUEST_IDS: ContextVar[list[types.RequestId] | None] = ContextVar("mcp_request_ids", default=None)


class _Session(ClientSession):
    """The SDK's session, telling a caller its request's id (the SDK keeps it
    to itself, and a cancellation must name it)."""

    async def send_request(self, *args: Any, **kwargs: Any) -> Any:
        holder = _REQUEST_IDS.get()
        if holder is not None:
            holder.append(self._request_id)  # the id this request is about to get
        return await super().send_request(*args, **kwargs)


def task_only(tool: types.Tool) -> bool:
    """Whether the tool can be called only as a task (task-augmented `tools/call`)."""
    execution = tool.execution
    return execution is not None and execution.taskSupport == types.TASK_REQUIRED


async def _list_tools(session: ClientSession, config: McpServerConfig) -> tuple[types.Tool, ...]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(_MAX_PAGES):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.nextCursor
        if not cursor:
            break
    return tuple(t for t in tools if config.wants(t.name))


class McpServer:
    def __init__(
        self,
        key: str,
        config: McpServerConfig,
        *,
        on_change: Callable[[McpServer], None] = lambda _server: None,
        backoff: Backoff = DEFAULT_BACKOFF,
    ) -> None:
        self.key = key
        self.config = config
        self.backoff = backoff
        self._on_change = on_change
        self._state = ServerState.CONNECTING
        self._tools: tuple[types.Tool, ...] = ()
        self._left_out: tuple[types.Tool, ...] = ()
        self._logged_left_out: frozenset[str] = frozenset()
        self._session: ClientSession | None = None
        self._link: _Link | None = None
        self._error: str | None = None
        self._retry_at: float | None = None
        self._up_since: float | None = None
        self._stopping = asyncio.Event()
        self._connection: anyio.CancelScope | None = None  # the attempt running now
        self._tail = StderrTail()

    @property
    def name(self) -> str:
        return self.config.name or self.key

    @property
    def state(self) -> ServerState:
        return self._state

    @property
    def tools(self) -> tuple[types.Tool, ...]:
        """The server's tools while it is up (after enabled/disabled_tools); else ()."""
        return self._tools if self._state is ServerState.UP else ()

    @property
    def left_out(self) -> tuple[tuple[str, str], ...]:
        """(tool, why) of the server's tools not offered although listed (and
        wanted by enabled/disabled_tools), while it is up."""
        if self._state is not ServerState.UP:
            return ()
        return tuple((t.name, TASK_ONLY) for t in self._left_out)

    def status(self) -> ServerStatus:
        retry = None
        if self._state is ServerState.DOWN and self._retry_at is not None:
            retry = max(0.0, self._retry_at - time.monotonic())
        return ServerStatus(
            self.key,
            self.name,
            self.config.transport,
            self._state,
            len(self.tools),
            None if self._state is ServerState.UP else self._error,
            retry,
        )

    def request_stop(self) -> None:
        self._stopping.set()
        if self._link is not None:
            self._link.wake.set()

    def kill(self) -> None:
        """Stop now: the connection's teardown is cancelled at every await
        until it has ended (anyio's scope, where one task cancel is absorbed
        by the SDK's), so a stdio child still there is killed (SIGKILL)."""
        self.request_stop()
        if self._connection is not None:
            self._connection.cancel()

    def _set(self, state: ServerState, tools: tuple[types.Tool, ...] | None = None) -> None:
        self._state = state
        if tools is not None:
            self._left_out = tuple(t for t in tools if task_only(t))
            self._tools = tuple(t for t in tools if not task_only(t))
            names = frozenset(t.name for t in self._left_out)
            if names - self._logged_left_out:  # once, not on every reconnect
                self._logged_left_out |= names
                log.warning(
                    "mcp_tools_left_out", server=self.key, tools=sorted(names), reason=TASK_ONLY
                )
        self._on_change(self)

    def _lost(self, reason: str) -> None:
        """The connection is gone: its tools are withdrawn now, not when the
        supervisor has finished tearing it down."""
        if self._state is ServerState.UP:
            self._error = reason
            self._retry_at = None
            self._set(ServerState.DOWN, ())

    # -- the supervisor ------------------------------------------------------------
    async def run(self) -> None:
        failures = 0
        while not self._stopping.is_set():
            self._up_since = None
            self._tail.lines.clear()  # the stderr of this attempt's child only
            error: str | None = None
            try:
                with anyio.CancelScope() as self._connection:
                    await self._connect_and_serve()
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if task is None or task.cancelling():
                    raise
                error = "the connection was cancelled"  # a stray cancel from the SDK's scopes
            except Exception as exc:
                error = describe(exc)
            finally:
                self._connection = None
            if self._stopping.is_set():
                break
            up_for = time.monotonic() - self._up_since if self._up_since is not None else 0.0
            if up_for >= self.backoff.max_secs:
                failures = 0
            delay = self.backoff.delay(failures)
            failures += 1
            self._error = error or "the connection ended"
            self._retry_at = time.monotonic() + delay
            self._set(ServerState.DOWN, ())
            log.warning(
                "mcp_server_down" if self._up_since is not None else "mcp_connect_failed",
                server=self.key,
                error=self._error,
                retry_in_secs=delay,
                stderr=list(self._tail.lines) or None,
            )
            try:
                await asyncio.wait_for(self._stopping.wait(), delay)
            except TimeoutError:
                self._set(ServerState.CONNECTING)
        self._set(ServerState.STOPPED, ())
        log.debug("mcp_server_stopped", server=self.key)

    async def _connect_and_serve(self) -> None:
        """One connection, from opening the transport until it ends. Returns
        normally only when the gateway stops."""
        link = _Link(self._lost)
        config = self.config
        async with AsyncExitStack() as stack:
            stack.callback(link.dead.set)  # whatever happens, waiting calls stop waiting
            read, write = await stack.enter_async_context(
                open_transport(self.key, config, link.lost, self._tail)
            )
            session = await stack.enter_async_context(
                _Session(
                    read,
                    write,
                    read_timeout_seconds=timedelta(seconds=config.timeout_secs),
                    message_handler=self._handler(link),
                    client_info=CLIENT_INFO,
                )
            )
            tools = await self._unless_stopped(self._initialise(session), link)
            if tools is None:
                return
            self._session, self._link = session, link
            self._up_since = time.monotonic()
            self._error = None
            self._set(ServerState.UP, tools)
            log.info("mcp_server_up", server=self.key, tools=len(tools))
            try:
                await self._serve(session, link)
            finally:
                link.dead.set()
                self._session = self._link = None

    async def _initialise(self, session: ClientSession) -> tuple[types.Tool, ...]:
        result = await session.initialize()
        if result.capabilities.tools is None:
            return ()  # a server of resources or prompts only: up, with no tools
        return await _list_tools(session, self.config)

    async def _unless_stopped(self, work: Coroutine[Any, Any, T], link: _Link) -> T | None:
        """`work`'s result; None if the gateway stopped first. Raises
        ConnectionLost if the connection dropped first."""
        try:
            return await _race(work, (self._stopping, link.dead), f"mcp:{self.key}")
        except _Interrupted:
            if link.lost_reason is not None:
                raise ConnectionLost(link.lost_reason) from None
            return None

    async def _serve(self, session: ClientSession, link: _Link) -> None:
        config = self.config
        while True:
            try:
                await asyncio.wait_for(link.wake.wait(), config.ping_interval_secs)
            except TimeoutError:
                link.check = True
            link.wake.clear()
            if self._stopping.is_set():
                return
            if link.lost_reason is not None:
                raise ConnectionLost(link.lost_reason)
            if link.check:
                link.check = False
                await self._unless_stopped(session.send_ping(), link)
            if link.refresh:
                link.refresh = False
                tools = await self._unless_stopped(_list_tools(session, config), link)
                if tools is not None:
                    self._set(ServerState.UP, tools)
                    log.info("mcp_tools_changed", server=self.key, tools=len(tools))

    def _handler(self, link: _Link) -> MessageHandlerFnT:
        async def handle(
            message: RequestResponder[types.ServerRequest, types.ClientResult]
            | types.ServerNotification
            | Exception,
        ) -> None:
            if isinstance(message, types.ServerNotification):
                if isinstance(message.root, types.ToolListChangedNotification):
                    link.request(refresh=True)  # listed by the supervisor, not in this reader
            elif isinstance(message, Exception):
                log.debug("mcp_transport_error", server=self.key, error=describe(message))

        return handle

    # -- calls -------------------------------------------------------------------------
    async def call(self, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """Call the server's tool `tool`. Raises McpUnavailable when the server
        is not up or drops during the call, McpCallFailed when it refuses."""
        session, link = self._session, self._link
        if session is None or link is None or self._state is not ServerState.UP:
            raise McpUnavailable(
                f"MCP server `{self.key}` is unavailable; its tools cannot be used right now"
            )
        timeout = self.config.timeout_secs
        dropped = McpUnavailable(
            f"MCP server `{self.key}` dropped the connection during this call (it may or may "
            "not have taken effect); the gateway is reconnecting, so do not count on its "
            "tools for now"
        )
        sent: list[types.RequestId] = []
        token = _REQUEST_IDS.set(sent)  # the call's task (made in _race) copies it
        try:
            work = session.call_tool(
                tool, arguments, read_timeout_seconds=timedelta(seconds=timeout)
            )
            return await _race(work, (link.dead,), f"mcp-call:{self.key}")
        except _Interrupted:
            raise dropped from None
        except asyncio.CancelledError:
            await self._cancel_at_server(session, link, sent, "the client gave up the call")
            raise
        except McpError as exc:
            code = exc.error.code
            if code in (types.CONNECTION_CLOSED, _SESSION_GONE):
                link.lost(exc.error.message)
                raise dropped from None
            if code == _REQUEST_TIMEOUT:
                await self._cancel_at_server(session, link, sent, "timed out")
                link.request(check=True)  # slow or hung? the ping tells
                raise McpCallFailed(
                    f"MCP server `{self.key}` did not answer within {timeout:g}s"
                ) from None
            raise McpCallFailed(
                f"MCP server `{self.key}` refused the call: {exc.error.message}"
            ) from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
            link.lost("the connection is closed")
            raise dropped from None
        except RuntimeError as exc:  # the SDK's check of a result against the output schema
            raise McpCallFailed(f"MCP server `{self.key}` sent an invalid result: {exc}") from None
        finally:
            _REQUEST_IDS.reset(token)

    async def _cancel_at_server(
        self, session: ClientSession, link: _Link, sent: list[types.RequestId], reason: str
    ) -> None:
        """Tell the server to stop the call we gave up (`notifications/cancelled`).
        Best effort and bounded: a connection that is gone or stuck is not waited for."""
        if not sent or link.dead.is_set():
            return
        notice = types.ClientNotification(
            types.CancelledNotification(
                params=types.CancelledNotificationParams(requestId=sent[0], reason=reason)
            )
        )
        try:
            async with asyncio.timeout(_CANCEL_SEND_SECS):
                await session.send_notification(notice)
        except Exception as exc:  # the connection broke meanwhile: nothing left to cancel
            log.debug("mcp_cancel_not_sent", server=self.key, error=describe(exc))
        else:
            log.debug("mcp_call_cancelled", server=self.key, request_id=sent[0], reason=reason)
