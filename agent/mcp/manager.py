"""All configured MCP servers: their supervisors, the tools offered now, and
what the model, /ready and /metrics are told about them.

`McpManager` is a service (start returns at once: start-up and /ready never
wait for MCP) and a `ToolSource` for the tool registry: `specs()` holds the
tools of the servers that are up *now*, rebuilt whenever a server comes up,
goes down or lists new tools, so every turn offers exactly those. A name
already taken — by a built-in tool or another server's tool — is skipped for
the newcomer with one warning. `agent.mcp.status.McpStatusPart` tells the model
which servers are not up.

Images in a result reach a model that reads them (`ToolContext.accepts_images`)
as files under `media_dir/mcp/` (aged out with the received files) named in
the tool message's media; without a `media_dir` they stay placeholders.

Input schemas are passed on as the server sent them, less the top-level
`$schema` (the dialect tag: some OpenAI-compatible endpoints refuse it, and
it tells the model nothing); `type: object` and `properties: {}` are added
when missing, as function calling requires an object.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Final

import structlog
from mcp import types

from agent.mcp.config import McpServerConfig
from agent.mcp.content import ResultImage, result_content
from agent.mcp.errors import McpCallFailed, McpUnavailable
from agent.mcp.naming import tool_name
from agent.mcp.server import DEFAULT_BACKOFF, Backoff, McpServer, ServerState, ServerStatus
from agent.providers.base import ToolSpec
from agent.providers.media import IMAGE_EXTENSIONS
from agent.tools.base import ToolContext, ToolError, ToolOutput

__all__ = ["DROPPED_SCHEMA_KEYS", "CallOutcome", "McpManager", "tool_spec"]

log = structlog.get_logger(__name__)

# stdio: stdin closed, 2 s, SIGTERM, 2 s, SIGKILL (the SDK's steps); a server
# still there at the end of the grace is killed (the last _KILL_SECS of it).
# The gateway passes what is left of its shutdown budget instead.
_STOP_GRACE_SECS: Final = 10.0
_KILL_SECS: Final = 0.5


class CallOutcome(StrEnum):
    OK = "ok"
    ERROR = "error"  # the server said isError, refused, or timed out
    UNAVAILABLE = "unavailable"  # not up, or dropped during the call


CallObserver = Callable[[str, CallOutcome, float], None]  # server key, outcome, seconds


@dataclass(frozen=True, slots=True)
class _Offer:
    server: str
    tool: str  # the server's own name for it
    spec: ToolSpec


DROPPED_SCHEMA_KEYS: Final = ("$schema",)  # top level only (see the module docstring)


def tool_spec(name: str, server: McpServer, tool: types.Tool) -> ToolSpec:
    """The tool as the model is offered it."""
    schema: dict[str, Any] = {
        k: v for k, v in tool.inputSchema.items() if k not in DROPPED_SCHEMA_KEYS
    }
    schema.setdefault("type", "object")
    if schema["type"] == "object":
        schema.setdefault("properties", {})
    about = tool.description or tool.title or f"The {tool.name} tool."
    return ToolSpec(name, f"[MCP server {server.name}] {about}", schema)


class McpManager:
    def __init__(
        self,
        servers: Mapping[str, McpServerConfig],
        *,
        disabled: Iterable[str] = (),
        reserved: Iterable[str] = (),
        on_call: CallObserver | None = None,
        backoff: Backoff = DEFAULT_BACKOFF,
        media_dir: Path | None = None,
    ) -> None:
        """`servers`: the `mcpServers` section (inactive ones are never started);
        `disabled`: `tools.disabled` (final names); `reserved`: names other tools use;
        `media_dir`: where images of results are kept for the model (None: not shown)."""
        self._servers = {
            key: McpServer(key, config, on_change=self._server_changed, backoff=backoff)
            for key, config in servers.items()
            if config.is_active
        }
        self._disabled = frozenset(disabled)
        self._reserved = frozenset(reserved)
        self._on_call = on_call
        self._images_dir = media_dir / "mcp" if media_dir is not None else None
        self._offers: dict[str, _Offer] = {}
        self._specs: tuple[ToolSpec, ...] = ()
        self._known: dict[str, str] = {}  # every name a server offered → its key
        self._warned: set[tuple[str, str]] = set()
        self._changed = asyncio.Event()
        self._tasks: dict[str, asyncio.Task[None]] = {}  # server key → its supervisor

    name = "mcp servers"

    @property
    def servers(self) -> Mapping[str, McpServer]:
        return self._servers

    # -- lifecycle -----------------------------------------------------------------
    async def start(self, tg: asyncio.TaskGroup) -> None:
        """Start every server's supervisor and return at once."""
        for key, server in self._servers.items():
            self._tasks[key] = tg.create_task(server.run(), name=f"mcp:{key}")

    async def stop(self, grace_secs: float = _STOP_GRACE_SECS) -> None:
        """Ask every server to stop, and return within `grace_secs`: a server
        still stopping near its end is killed (a stdio child gets SIGKILL)."""
        for server in self._servers.values():
            server.request_stop()
        if not self._tasks:
            return
        tasks = self._tasks.values()
        await asyncio.wait(tasks, timeout=max(0.0, grace_secs - _KILL_SECS))
        slow = [key for key, task in self._tasks.items() if not task.done()]
        if slow:
            log.warning("mcp_server_stop_slow", servers=slow, grace_secs=round(grace_secs, 2))
            for key in slow:
                self._servers[key].kill()
            await asyncio.wait(tasks)

    # -- state -----------------------------------------------------------------------
    def statuses(self) -> list[ServerStatus]:
        return [s.status() for s in self._servers.values()]

    def left_out(self) -> list[tuple[str, str]]:
        """(name, why) of the tools up servers list but that are not offered
        (task-only ones, agent.mcp.server.task_only)."""
        return [
            (tool_name(key, tool), why)
            for key, server in self._servers.items()
            for tool, why in server.left_out
        ]

    def unavailable(self) -> list[str]:
        """Keys of the servers that are not up, in configuration order."""
        return [k for k, s in self._servers.items() if s.state is not ServerState.UP]

    async def wait_until(self, condition: Callable[[], bool]) -> None:
        """Return once `condition()` holds; it is checked on every change of a server."""
        while not condition():
            await self._changed.wait()

    def _server_changed(self, server: McpServer) -> None:
        key = server.key
        self._offers = {n: o for n, o in self._offers.items() if o.server != key}
        self._claim(server)
        for other in self._servers.values():
            if other is not server:
                self._claim(other)  # names `server` gave up go to the next in line
        self._specs = tuple(self._offers[n].spec for n in sorted(self._offers))
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()  # wakes every waiter; later ones wait on the new event

    def _claim(self, server: McpServer) -> None:
        """Offer `server`'s tools whose names are free; the rest are skipped with a warning."""
        key = server.key
        for tool in server.tools:
            name = tool_name(key, tool.name)
            owner = self._offers.get(name)
            if owner is not None and (owner.server, owner.tool) == (key, tool.name):
                continue  # offered already
            if name in self._reserved or owner is not None:
                if (key, tool.name) not in self._warned:
                    self._warned.add((key, tool.name))
                    log.warning(
                        "mcp_tool_name_taken",
                        server=key,
                        tool=tool.name,
                        name=name,
                        taken_by=f"MCP server {owner.server}" if owner else "a built-in tool",
                    )
                continue
            self._known[name] = key
            if name not in self._disabled:
                self._offers[name] = _Offer(key, tool.name, tool_spec(name, server, tool))

    # -- ToolSource ------------------------------------------------------------------
    def specs(self) -> Sequence[ToolSpec]:
        return self._specs

    def owns(self, name: str) -> bool:
        return name in self._offers or self._server_of(name) is not None

    def _server_of(self, name: str) -> str | None:
        """The server a name not offered now belongs to: the one that offered it
        before, else the configured key it starts with (a server not up yet)."""
        key = self._known.get(name)
        if key is not None:
            return key
        prefixes = [k for k in self._servers if name.startswith(tool_name(k, ""))]
        return max(prefixes, key=len, default=None)

    async def call(
        self, name: str, arguments: dict[str, Any], ctx: ToolContext
    ) -> str | ToolOutput:
        offer = self._offers.get(name)
        if offer is None:
            key = self._server_of(name)
            if key is None or name in self._disabled:
                raise ToolError(f"unknown tool {name!r}")
            self._observe(key, CallOutcome.UNAVAILABLE, 0.0)
            if self._servers[key].state is ServerState.UP:
                raise ToolError(f"MCP server `{key}` no longer offers {name!r}")
            raise McpUnavailable(f"MCP server `{key}` is unavailable; its tools cannot be used now")
        started = time.monotonic()
        outcome: CallOutcome | None = CallOutcome.UNAVAILABLE
        try:
            result = await self._servers[offer.server].call(offer.tool, arguments)
            shown = ctx.accepts_images and self._images_dir is not None and not result.isError
            content = result_content(result, images=shown)
            outcome = CallOutcome.ERROR if result.isError else CallOutcome.OK
        except McpCallFailed:
            outcome = CallOutcome.ERROR
            raise
        except asyncio.CancelledError:
            outcome = None  # the turn was stopped: no outcome of the server's
            raise
        finally:
            if outcome is not None:
                self._observe(offer.server, outcome, time.monotonic() - started)
        if result.isError:
            raise ToolError(content.text)
        if not content.images or self._images_dir is None:
            return content.text
        paths = await asyncio.to_thread(_save_images, self._images_dir, content.images)
        return ToolOutput(content.text, paths)

    def _observe(self, server: str, outcome: CallOutcome, seconds: float) -> None:
        if self._on_call is not None:
            self._on_call(server, outcome, seconds)


def _save_images(folder: Path, images: tuple[ResultImage, ...]) -> tuple[str, ...]:
    """Each image as a new file in `folder` (the history names them by path)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths: list[str] = []
    for image in images:
        path = folder / f"{uuid.uuid4().hex}{IMAGE_EXTENSIONS[image.mime_type]}"
        path.write_bytes(image.data)
        paths.append(str(path))
    return tuple(paths)
