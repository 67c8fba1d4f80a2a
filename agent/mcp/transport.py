"""Opening one MCP server's transport with the SDK: stdio child or streamable HTTP.

stdio: the SDK starts the child in its own session (process group) and, when
the transport closes, closes its stdin, waits, then SIGTERMs and SIGKILLs the
group. The child's environment is the SDK's short safe list (HOME, LOGNAME,
PATH, SHELL, TERM, USER) plus the server's own `env` — never the gateway's
environment, so provider keys and channel tokens do not leak into it. Its
stderr goes to our log line by line (debug), and the last lines are kept for
the warning when it goes down.

HTTP: an httpx client carrying the configured headers, whose transport reports
a dropped connection (a connection or read error, or a 404 for our session id)
through `on_lost` at once. The SDK alone would not: a response stream cut
mid-call leaves the call waiting for its timeout.
"""

from __future__ import annotations

import asyncio
import os
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TextIO

import anyio
import httpx
import structlog
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

from agent.mcp.config import McpServerConfig, McpTransport

__all__ = ["Streams", "open_transport"]

log = structlog.get_logger(__name__)

Streams = tuple[
    MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]
]
OnLost = Callable[[str], None]

_STDERR_TAIL = 5
_SSE_READ_SECS = 300.0  # a server may keep its event stream quiet this long
_SESSION_HEADER = "mcp-session-id"


class StderrTail:
    """The last lines a stdio server wrote to stderr."""

    def __init__(self) -> None:
        self.lines: deque[str] = deque(maxlen=_STDERR_TAIL)


async def _log_stderr(fd: int, server: str, tail: StderrTail) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    pipe = os.fdopen(fd, "rb", buffering=0)
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    try:
        while raw := await reader.readline():
            line = raw.decode("utf-8", errors="replace").rstrip()
            if line:
                tail.lines.append(line[:500])
                log.debug("mcp_server_stderr", server=server, line=line)
    finally:
        transport.close()


@asynccontextmanager
async def _stderr_pipe(server: str, tail: StderrTail) -> AsyncIterator[TextIO]:
    read_fd, write_fd = os.pipe()
    writer = os.fdopen(write_fd, "w")
    task = asyncio.create_task(_log_stderr(read_fd, server, tail), name=f"mcp-stderr:{server}")
    try:
        yield writer
    finally:
        writer.close()  # the child is gone by now: the reader sees the end of the pipe
        try:
            await asyncio.wait([task], timeout=1.0)  # unless a grandchild holds it open
        finally:
            task.cancel()


class _WatchedStream(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, on_lost: OnLost) -> None:
        self._inner = inner
        self._on_lost = on_lost

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._inner:
                yield chunk
        except httpx.TimeoutException:
            raise
        except httpx.TransportError as exc:
            self._on_lost(f"connection dropped ({type(exc).__name__})")
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()


class _WatchedTransport(httpx.AsyncBaseTransport):
    """httpx transport that reports the server going away to `on_lost`."""

    def __init__(self, on_lost: OnLost) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self._on_lost = on_lost

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            response = await self._inner.handle_async_request(request)
        except httpx.TimeoutException:
            raise  # slow is not gone; the ping decides
        except httpx.TransportError as exc:
            self._on_lost(f"cannot reach the server ({type(exc).__name__})")
            raise
        if response.status_code == 404 and _SESSION_HEADER in request.headers:
            self._on_lost("the server no longer knows our session")
        assert isinstance(response.stream, httpx.AsyncByteStream)
        response.stream = _WatchedStream(response.stream, self._on_lost)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def _stdio_params(config: McpServerConfig) -> StdioServerParameters:
    assert config.command is not None
    return StdioServerParameters(
        command=config.command,
        args=list(config.args),
        env=dict(config.env),  # added to the SDK's safe list; None would mean that list only
        cwd=Path(config.cwd).expanduser() if config.cwd else None,
    )


@asynccontextmanager
async def _stdio(server: str, config: McpServerConfig, tail: StderrTail) -> AsyncIterator[Streams]:
    params = _stdio_params(config)
    async with _stderr_pipe(server, tail) as errlog, stdio_client(params, errlog) as streams:
        yield streams


@asynccontextmanager
async def _http(config: McpServerConfig, on_lost: OnLost) -> AsyncIterator[Streams]:
    assert config.base_url is not None
    client = httpx.AsyncClient(
        headers=dict(config.headers),
        timeout=httpx.Timeout(config.timeout_secs, read=max(_SSE_READ_SECS, config.timeout_secs)),
        transport=_WatchedTransport(on_lost),
    )
    async with client, streamable_http_client(config.base_url, http_client=client) as streams:
        yield streams[0], streams[1]


@asynccontextmanager
async def open_transport(
    server: str, config: McpServerConfig, on_lost: OnLost, tail: StderrTail
) -> AsyncIterator[Streams]:
    """The server's (read, write) streams; `on_lost` hears of a dropped connection."""
    if config.transport is McpTransport.STDIO:
        transport = _stdio(server, config, tail)
    else:
        transport = _http(config, on_lost)
    async with transport as (read, write), _pump(read, on_lost) as session_read:
        yield session_read, write


@asynccontextmanager
async def _pump(
    source: MemoryObjectReceiveStream[SessionMessage | Exception], on_lost: OnLost
) -> AsyncIterator[MemoryObjectReceiveStream[SessionMessage | Exception]]:
    """A copy of `source` that reports its end: a stdio child that exits closes
    its stdout, and nothing else tells the session."""
    send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

    async def copy() -> None:
        async with send:
            try:
                async for message in source:
                    await send.send(message)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return  # our side closed first: teardown, not a lost server
        on_lost("the server closed the connection")

    task = asyncio.create_task(copy(), name="mcp-read")
    try:
        yield receive
    finally:
        # Synchronous closes: this may run while the SDK's task group is being
        # cancelled, where any await can be interrupted.
        task.cancel()
        receive.close()
        source.close()  # the SDK leaves closing its read end to the reader
        await asyncio.wait([task])
