"""MCP errors and how a failure is described to operators.

    ToolError (agent.tools.base: the model reads the message)
    ├── McpUnavailable   the server is not up, or dropped during the call
    └── McpCallFailed    the server is up but the call failed (refused, timed out, bad result)
    ConnectionLost       internal: ends a connection so the supervisor reconnects

`describe` turns what ended a connection attempt into a short reason for
/ready, `picobot mcp list` and the log: no URLs (they may carry a key), no
tracebacks, exception groups from the SDK's task groups unwrapped.
"""

from __future__ import annotations

import asyncio

import httpx
from mcp import McpError

from agent.tools.base import ToolError

__all__ = ["ConnectionLost", "McpCallFailed", "McpUnavailable", "describe"]

_MAX_REASON = 200


class McpUnavailable(ToolError):
    """The server's tools cannot be used now; the message says so to the model."""


class McpCallFailed(ToolError):
    """The server is up, but this call failed; the message says why."""


class ConnectionLost(Exception):
    """The connection to the server is gone (the message says how)."""


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]


def _one(exc: BaseException) -> str:
    if isinstance(exc, ConnectionLost):
        return str(exc)
    if isinstance(exc, McpError):
        return f"the server answered with an error: {exc.error.message}"
    if isinstance(exc, httpx.HTTPStatusError):
        return f"the server answered HTTP {exc.response.status_code}"
    if isinstance(exc, httpx.TimeoutException | TimeoutError):
        return "timed out"
    if isinstance(exc, httpx.TransportError):
        return f"cannot reach the server ({type(exc).__name__})"
    if isinstance(exc, FileNotFoundError):
        return f"cannot start the server: {exc.filename or 'command'} not found"
    if isinstance(exc, OSError):
        return f"cannot start the server: {exc.strerror or type(exc).__name__}"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def describe(exc: BaseException) -> str:
    leaves = [e for e in _leaves(exc) if not isinstance(e, asyncio.CancelledError)] or [exc]
    reason = _one(leaves[0])
    return reason if len(reason) <= _MAX_REASON else reason[: _MAX_REASON - 1] + "…"
