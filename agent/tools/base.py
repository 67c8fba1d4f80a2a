"""The tool contract: argument models, the context a call runs in, the registry.

A tool is a small class with a pydantic `Args` model (which yields the JSON
schema the model sees) and an async `run`. A tool signals a problem the model
should read by raising `ToolError`; any other exception is caught by the
registry and reported to the model as a generic failure. Nothing here raises
out of `ToolRegistry.execute` except cancellation. A `ToolCallWatcher` given
to `execute_batch` is told when each call starts and ends (progress shown in
the chat); what it raises is logged, never passed on.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Final, Generic, Protocol, TypeVar

import structlog
from pydantic import BaseModel, ConfigDict, ValidationError

from agent.memory.types import MemoryEntry, MemoryOrigin, MemoryScope, WriteOutcome
from agent.messages import ToolCall
from agent.providers.base import ToolSpec
from agent.spend import TurnSpend
from agent.subagents.types import SubagentTask
from agent.tools.sandbox import Sandbox

__all__ = [
    "TOOL_SCOPE",
    "AdminDirectory",
    "FileSender",
    "MemoryService",
    "SchedulerService",
    "SendQuota",
    "SessionMessenger",
    "SkillService",
    "SubagentService",
    "Tool",
    "ToolArgs",
    "ToolCallWatcher",
    "ToolContext",
    "ToolError",
    "ToolOutput",
    "ToolRegistry",
    "ToolResult",
    "ToolServices",
    "ToolSettings",
    "ToolSource",
    "compact_schema",
]

log = structlog.get_logger(__name__)

# What the runtime runs each tool call inside, in this context: a tracing
# span while tracing is on (gateway.ops.tracing). None, the default: nothing.
TOOL_SCOPE: ContextVar[Callable[[ToolCall], AbstractContextManager[object]] | None] = ContextVar(
    "tool_scope", default=None
)


class ToolError(Exception):
    """A failure whose message is meant for the model (no secrets, no tracebacks)."""


class ToolArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# Services that later features inject; tools needing one check it is present.
class MemoryService(Protocol):
    """Long-term memory of one scope at a time (agent.memory.types). Writes are
    durable when they return; a refused write raises `MemoryLimitError`."""

    async def search(
        self, scope: MemoryScope, query: str, namespace: str | None, limit: int
    ) -> list[MemoryEntry]: ...

    async def get(self, scope: MemoryScope, namespace: str, key: str) -> MemoryEntry | None: ...

    async def entries(
        self, scope: MemoryScope, namespace: str | None, limit: int
    ) -> list[MemoryEntry]: ...

    async def put(
        self, scope: MemoryScope, namespace: str, key: str, content: str, origin: MemoryOrigin
    ) -> WriteOutcome: ...

    async def update(
        self, scope: MemoryScope, namespace: str, key: str, content: str, origin: MemoryOrigin
    ) -> bool: ...

    async def delete(self, scope: MemoryScope, namespace: str, key: str) -> bool: ...


class SchedulerService(Protocol):
    """Jobs of the scheduler; each request acts for the asking sender, who
    reaches only their own jobs unless `admin` (the tool decides that, never
    the model)."""

    async def manage(
        self, action: str, payload: Mapping[str, Any], *, channel: str, sender_id: str, admin: bool
    ) -> dict[str, Any]: ...


class SkillService(Protocol):
    """The skill runtime (skills/) behind `skill_activate` and `skill_manage`.
    Each call returns the text for the model and raises `ToolError` for what
    the model should read; `request` is the manage tool's own `Args`."""

    async def activate(self, name: str, ctx: ToolContext) -> str: ...

    async def manage(self, request: ToolArgs, ctx: ToolContext) -> str: ...


@dataclass(frozen=True, slots=True)
class SendQuota:
    """At most `limit` session messages in any `window_secs` from one sender
    (the principal whose message started the turn: "channel:sender_id"; a
    sub-agent's is its parent's) and to one target chat."""

    sender: str
    limit: int
    window_secs: float = 60.0


class SessionMessenger(Protocol):
    async def send(self, channel: str, chat_id: str, text: str, quota: SendQuota) -> float | None:
        """Deliver `text` and record it in the target chat's history, counted
        against `quota` in the same transaction (across sessions, sub-agents
        and restarts). None when sent; else nothing was sent and this is the
        seconds until the quota has room again."""
        ...


class SubagentService(Protocol):
    """Runs one sub-agent to its final text (gateway.tools.subagents); raises
    `ToolError` for what the model should read (e.g. it ran out of time)."""

    async def run(self, task: SubagentTask, ctx: ToolContext) -> str: ...


class FileSender(Protocol):
    """Delivers a file to a chat through the durable outbox (`send_file`).
    Raises `ToolError` for what the model should read (too big, a channel
    that cannot send files); returns a short confirmation."""

    async def send_file(
        self, channel: str, chat_id: str, path: Path, *, caption: str, reply_to: str | None
    ) -> str: ...


class AdminDirectory(Protocol):
    """The access policy's notion of admin (gateway.access.policy): e.g. for a tool that
    may reach another chat only when the asking sender is an admin."""

    def is_admin(self, channel: str, sender_id: str) -> bool: ...


@dataclass(frozen=True, slots=True)
class ToolServices:
    """The runtime services tools reach, wired once by the composition root.
    None: not available in this gateway (a tool needing it says so)."""

    memory: MemoryService | None = None
    scheduler: SchedulerService | None = None
    skills: SkillService | None = None
    messenger: SessionMessenger | None = None
    admins: AdminDirectory | None = None
    subagents: SubagentService | None = None
    files: FileSender | None = None


NO_SERVICES = ToolServices()


@dataclass(frozen=True, slots=True)
class ToolSettings:
    """Operator limits every tool honours (from the `tools` config section)."""

    workspace: Path
    restrict_to_workspace: bool = True
    read_max_bytes: int = 256_000
    exec_timeout_secs: float = 60.0
    exec_output_max_chars: int = 20_000
    http_timeout_secs: float = 30.0
    http_max_bytes: int = 2_000_000
    http_allow_private: bool = False
    # how the shell tool's child runs (agent/tools/sandbox.py); default: no sandbox
    shell_sandbox: Sandbox = field(default_factory=Sandbox)
    # Folders `read` may read from although they lie outside the workspace (the
    # skill sources); never written through the file tools.
    read_roots: tuple[Path, ...] = ()


@dataclass(slots=True)
class ToolContext:
    session_id: str
    channel: str
    chat_id: str
    sender_id: str
    settings: ToolSettings
    message_id: str | None = None
    message_seq: int | None = None
    run_id: str | None = None
    services: ToolServices = NO_SERVICES
    call_id: str | None = None  # the tool call being run (set by the registry per call)
    reply_to: str | None = None  # the platform handle a reply to this turn carries
    # whether the model of this turn reads images (the agent loop sets it from
    # `models.<name>.supports_vision`): a tool may then attach them to its result
    accepts_images: bool = False
    # what the turn has spent against its caps (agent.spend), set by the agent
    # loop; a sub-agent's loop counts into its parent turn's
    spend: TurnSpend | None = None

    @property
    def workspace(self) -> Path:
        return self.settings.workspace


A = TypeVar("A", bound=ToolArgs)


class Tool(ABC, Generic[A]):
    name: ClassVar[str]
    description: ClassVar[str]
    Args: ClassVar[type[ToolArgs]]
    # True for a tool that bounds its own running time (task: max_execution_secs)
    # and so is exempt from the registry's `timeout_secs`
    own_timeout: ClassVar[bool] = False

    @abstractmethod
    async def run(self, args: A, ctx: ToolContext) -> str: ...

    def spec(self) -> ToolSpec:
        schema = compact_schema(self.Args.model_json_schema())
        # extra arguments are refused by validation (ToolArgs forbids them) with
        # an error the model reads; saying so in every request costs bytes
        schema.pop("additionalProperties", None)
        return ToolSpec(self.name, self.description, schema)


_NAMED = frozenset({"properties", "$defs", "definitions", "patternProperties"})
_UNSHOWN = frozenset(
    {
        "title",
        "minLength",
        "maxLength",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
    }
)
_NULL: Final = {"type": "null"}


def compact_schema(node: Any) -> Any:
    """A pydantic JSON schema without what the model does not need, since every
    request carries every tool's schema: no `title`s, no length or range bounds
    (validation still enforces them, and its error names the bound), no
    defaults (an argument left out gets its default all the same), and an
    optional field (`X | None = None`) as plain `X` (absent means None;
    validation still accepts an explicit null). Names under `properties` are
    kept as they are."""
    if isinstance(node, list):
        return [compact_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _UNSHOWN and isinstance(value, str | int):
            continue
        if key in _NAMED and isinstance(value, dict):
            out[key] = {name: compact_schema(sub) for name, sub in value.items()}
        else:
            out[key] = compact_schema(value)
    options = out.get("anyOf")
    if (
        isinstance(options, list)
        and len(options) == 2
        and _NULL in options
        and "default" in out
        and out["default"] is None
    ):
        inner = options[1 - options.index(_NULL)]
        if isinstance(inner, dict):
            rest = {k: v for k, v in out.items() if k not in ("anyOf", "default")}
            return {**inner, **rest}
    out.pop("default", None)
    return out


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """A result with images: its text, and image files (local paths) the
    model is shown with it. Only returned when `ToolContext.accepts_images`."""

    text: str
    media: tuple[str, ...] = ()


class ToolSource(Protocol):
    """Tools that come and go while the gateway runs (MCP servers). The registry
    asks for `specs()` on every turn; a call of a name the source `owns` goes
    to `call`, which raises `ToolError` for what the model should read."""

    def specs(self) -> Sequence[ToolSpec]: ...

    def owns(self, name: str) -> bool: ...

    async def call(
        self, name: str, arguments: dict[str, Any], ctx: ToolContext
    ) -> str | ToolOutput: ...


@dataclass(frozen=True, slots=True)
class ToolResult:
    call: ToolCall
    content: str
    ok: bool
    media: tuple[str, ...] = ()  # image files shown to the model with the result


class ToolCallWatcher(Protocol):
    async def tool_started(self, call: ToolCall) -> None:
        """`call` is about to run (after its batch's assistant message is stored)."""
        ...

    async def tool_finished(self, result: ToolResult, secs: float) -> None:
        """`result.call` ended after `secs` seconds."""
        ...


def _arguments_of(call: ToolCall) -> dict[str, Any]:
    """A call's arguments as an object, or a ToolError that says why not.
    (Their strings are valid Unicode: the provider saw to it, `valid_arguments`.)"""
    try:
        raw = json.loads(call.arguments or "{}")
    except json.JSONDecodeError as exc:
        raise ToolError(f"arguments are not valid JSON: {exc.msg}") from None
    except RecursionError:
        raise ToolError("arguments are nested too deeply") from None
    except ValueError as exc:  # an integer longer than int() takes
        raise ToolError(f"arguments cannot be read: {exc}") from None
    if not isinstance(raw, dict):
        raise ToolError("arguments must be a JSON object")
    return raw


class ToolRegistry:
    def __init__(self, tools: Iterable[Tool[Any]] = (), *, timeout_secs: float = 120.0) -> None:
        self._tools: dict[str, Tool[Any]] = {}
        self._specs: list[ToolSpec] | None = None  # JSON schemas are costly to build
        self.timeout_secs = timeout_secs
        self._sources: list[ToolSource] = []
        # which source tools this registry offers: (allow or None for all, deny)
        self._source_filter: tuple[frozenset[str] | None, frozenset[str]] = (None, frozenset())
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool[Any]) -> None:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} registered twice")
        self._tools[tool.name] = tool
        self._specs = None

    def add_source(self, source: ToolSource) -> None:
        """Offer `source`'s tools too, as they are when each turn starts."""
        self._sources.append(source)

    def _offers(self, name: str) -> bool:
        allow, deny = self._source_filter
        return (allow is None or name in allow) and name not in deny and name not in self._tools

    def _source_of(self, name: str) -> ToolSource | None:
        if not self._offers(name):
            return None
        return next((s for s in self._sources if s.owns(name)), None)

    def names(self) -> list[str]:
        return sorted(self._tools)

    def get(self, name: str) -> Tool[Any] | None:
        return self._tools.get(name)

    def narrowed(self, allow: Iterable[str] | None, deny: Iterable[str] = ()) -> ToolRegistry:
        """A registry holding only the tools `allow` names (all if None) minus `deny`."""
        allowed = set(self._tools) if allow is None else set(allow)
        denied = set(deny)
        kept = [t for n, t in self._tools.items() if n in allowed and n not in denied]
        narrow = ToolRegistry(kept, timeout_secs=self.timeout_secs)
        narrow._sources = self._sources  # the same live sources, seen through both filters
        was_allowed, was_denied = self._source_filter
        now_allowed = None if allow is None else frozenset(allow)
        if was_allowed is not None:
            now_allowed = was_allowed if now_allowed is None else was_allowed & now_allowed
        narrow._source_filter = (now_allowed, was_denied | denied)
        return narrow

    def specs(self) -> list[ToolSpec]:
        """The tools to offer now: the registered ones, then the sources' current ones."""
        if self._specs is None:
            self._specs = [self._tools[n].spec() for n in sorted(self._tools)]
        if not self._sources:
            return self._specs
        live = [spec for src in self._sources for spec in src.specs() if self._offers(spec.name)]
        return [*self._specs, *live]

    async def execute(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        tool = self._tools.get(call.name)
        source = self._source_of(call.name) if tool is None else None
        if tool is None and source is None:
            return ToolResult(call, f"Error: unknown tool {call.name!r}", ok=False)
        try:
            raw = _arguments_of(call)
            ctx = dataclasses.replace(ctx, call_id=call.id)
            limit = None if tool is not None and tool.own_timeout else self.timeout_secs
            async with asyncio.timeout(limit):
                if tool is not None:
                    content = await tool.run(tool.Args.model_validate(raw), ctx)
                else:
                    assert source is not None
                    output = await source.call(call.name, raw, ctx)  # the source validates
                    if isinstance(output, ToolOutput):
                        return ToolResult(call, output.text, ok=True, media=output.media)
                    content = output
            return ToolResult(call, content, ok=True)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                for e in exc.errors()
            )
            return ToolResult(call, f"Error: invalid arguments: {problems}", ok=False)
        except ToolError as exc:
            return ToolResult(call, f"Error: {exc}", ok=False)
        except TimeoutError:
            return ToolResult(call, f"Error: tool timed out after {self.timeout_secs:g}s", ok=False)
        except Exception:
            log.exception("tool_failed", tool=call.name)
            return ToolResult(call, "Error: the tool failed unexpectedly", ok=False)

    async def execute_batch(
        self,
        calls: Iterable[ToolCall],
        ctx: ToolContext,
        watcher: ToolCallWatcher | None = None,
    ) -> list[ToolResult]:
        """Run one batch of calls concurrently; results come back in call order."""
        calls = list(calls)
        if len(calls) == 1:
            return [await self._watched(calls[0], ctx, watcher)]
        async with asyncio.TaskGroup() as tg:
            tasks = [
                tg.create_task(self._watched(c, ctx, watcher), name=f"tool:{c.name}") for c in calls
            ]
        return [t.result() for t in tasks]

    async def _watched(
        self, call: ToolCall, ctx: ToolContext, watcher: ToolCallWatcher | None
    ) -> ToolResult:
        scope = TOOL_SCOPE.get()
        if scope is None:
            return await self._run_watched(call, ctx, watcher)
        with scope(call):
            return await self._run_watched(call, ctx, watcher)

    async def _run_watched(
        self, call: ToolCall, ctx: ToolContext, watcher: ToolCallWatcher | None
    ) -> ToolResult:
        if watcher is None:
            return await self.execute(call, ctx)
        try:
            await watcher.tool_started(call)
        except Exception:  # progress display must never fail the call
            log.exception("tool_watcher_failed", tool=call.name)
        started = time.monotonic()
        result = await self.execute(call, ctx)
        try:
            await watcher.tool_finished(result, time.monotonic() - started)
        except Exception:
            log.exception("tool_watcher_failed", tool=call.name)
        return result
