"""Running sub-agents (the `task` tool's service) and finding their types.

A child runs inline in the parent's tool call: its own session
(`task:<parent session>:<call id>`, storage/sql/conversations/subagents.py), its type's tools
minus `task` (no nesting), the agent its type names, no streaming, and a time
limit. Every message it produces is stored before the next model call, like a
turn's, so a child killed with the gateway resumes from its transcript when
the parent turn is recovered and runs the call again (the same call id finds
the same child session). Cancelled (`/stop`) or out of time, the child's
transcript is closed with `[cancelled]` results and a last word saying so.
Each child holds a run slot (gateway.turns.run_slots: a turn's first child borrows
its parent's), at most `subagents.max_concurrent` run at once, and a child
that gets no slot within `subagents.slot_wait_secs` is an error result, so the
parent's turn never hangs on it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

import structlog

from agent.context import TurnFacts
from agent.loop import AgentLoop
from agent.mcp.naming import PREFIX as MCP_PREFIX
from agent.messages import CANCELLED_RESULT, ChatMessage, Marker, ToolCall
from agent.providers.base import ProviderError
from agent.subagents.catalog import SubagentCatalog
from agent.subagents.discovery import scan
from agent.subagents.types import (
    TASK_TOOL,
    SubagentSource,
    SubagentTask,
    SubagentType,
    child_session_id,
)
from agent.tools.base import ToolContext, ToolError, ToolRegistry, ToolResult
from agent.turn_control import TurnControl
from gateway.config.loading import LoadedConfig
from gateway.turns.agents import AgentDirectory, AgentProfile, UnknownAgent
from gateway.turns.run_slots import NoRunSlot, RunSlots
from storage.store import Store

__all__ = ["SubagentRunner", "build_catalog", "subagent_roots"]

log = structlog.get_logger(__name__)


class _ChildObserver:
    """Stores the child's messages as they come; shows nothing in the chat."""

    def __init__(self, store: Store, child_id: str, run_id: str) -> None:
        self.store = store
        self.child_id = child_id
        self.run_id = run_id

    async def on_messages(self, messages: Sequence[ChatMessage]) -> None:
        await self.store.append_turn(self.child_id, self.run_id, messages, None)

    async def on_delta(self, text: str) -> None:
        return None

    async def tool_started(self, call: ToolCall) -> None:
        return None

    async def tool_finished(self, result: ToolResult, secs: float) -> None:
        return None


@dataclass(frozen=True, slots=True)
class _Child:
    id: str  # its session
    run_id: str
    secs: float  # its time limit
    profile: AgentProfile
    tools: ToolRegistry


class SubagentRunner:
    def __init__(
        self,
        store: Store,
        agents: AgentDirectory,
        *,
        slots: RunSlots,
        slot_wait_secs: float,
        default_max_execution_secs: float,
        control: TurnControl | None = None,
    ) -> None:
        """`control`: the approval policy as a child sees it (it cannot pause,
        so a held call is refused: agent.turn_control)."""
        self.store = store
        self.agents = agents
        self.default_secs = default_max_execution_secs
        self.control = control
        self.slots = slots
        self.slot_wait_secs = slot_wait_secs

    async def run(self, task: SubagentTask, ctx: ToolContext) -> str:
        kind = task.kind
        if ctx.call_id is None:
            raise ToolError("a sub-agent needs a tool call to run in")
        try:
            profile = self.agents.resolve(ctx.channel, kind.agent)
        except UnknownAgent as exc:
            raise ToolError(f"sub-agent type {kind.name!r} cannot run here: {exc}") from None
        child = _Child(
            child_session_id(ctx.session_id, ctx.call_id),
            f"{random.getrandbits(48):012x}",
            kind.max_execution_secs or self.default_secs,
            profile,
            profile.tools.narrowed(kind.allowed_tools, deny=(TASK_TOOL,)),
        )
        try:
            async with self.slots.child(self.slot_wait_secs):
                return await self._run(child, task, ctx)
        except NoRunSlot as exc:
            log.warning("subagent_no_slot", subagent=kind.name, secs=exc.wait_secs)
            raise ToolError(
                f"[no sub-agent slot within {exc.wait_secs:g}s] the gateway is running as "
                "many turns and sub-agents as it may (gateway.max_concurrent_runs, "
                "subagents.max_concurrent); run fewer tasks at once or do the work yourself"
            ) from None

    async def _run(self, child: _Child, task: SubagentTask, ctx: ToolContext) -> str:
        log_ = log.bind(child_session=child.id, subagent=task.kind.name)
        first = [
            ChatMessage.system(
                task.kind.instructions(task.description, task.prompt), Marker.SUBAGENT_PROMPT
            ),
            ChatMessage.user(task.description),
        ]
        opened = await self.store.transcripts.open_child(
            child.id, ctx.session_id, task.description, first, child.run_id
        )
        if opened.finished is not None:  # it ended before a crash the parent did not survive
            log_.info("subagent_already_done")
            return opened.finished
        if opened.resumed:
            log_.info("subagent_resumed", messages=len(opened.history))
        profile = child.profile
        child_ctx = dataclasses.replace(
            ctx, session_id=child.id, run_id=child.run_id, call_id=None, message_seq=None
        )
        loop = AgentLoop(
            profile.provider, child.tools, dataclasses.replace(profile.loop, stream=False)
        )
        observer = _ChildObserver(self.store, child.id, child.run_id)
        facts = TurnFacts(child.id, ctx.channel, ctx.chat_id, ctx.sender_id, profile.name)
        try:
            async with asyncio.timeout(child.secs):
                context = await profile.context.prepare(facts)
                result = await loop.run(
                    opened.history, child_ctx, observer, context, control=self.control
                )
        except TimeoutError:
            log_.warning("subagent_timed_out", secs=child.secs)
            await self.store.transcripts.close_child(
                child.id, child.run_id, f"[timed out after {child.secs:g}s]"
            )
            raise ToolError(
                f"the sub-agent did not finish within {child.secs:g}s "
                f"(its transcript: session {child.id})"
            ) from None
        except asyncio.CancelledError:
            log_.info("subagent_cancelled")
            await self.store.transcripts.close_child(child.id, child.run_id, CANCELLED_RESULT)
            raise
        except ProviderError as exc:
            log_.error("subagent_failed_provider", error=str(exc), error_type=type(exc).__name__)
            await self.store.transcripts.close_child(
                child.id, child.run_id, "[failed: the model call failed]"
            )
            raise ToolError("the sub-agent's model call failed") from None
        except Exception:
            log_.exception("subagent_failed")
            await self.store.transcripts.close_child(child.id, child.run_id, "[failed]")
            raise ToolError("the sub-agent failed unexpectedly") from None
        await self.store.append_turn(child.id, child.run_id, [result.reply], None)
        log_.info("subagent_done", rounds=result.tool_rounds)
        return result.reply.content.strip() or "(the sub-agent gave no text)"


def subagent_roots(loaded: LoadedConfig) -> list[tuple[SubagentSource, Path]]:
    """The enabled sources' folders, lowest precedence first."""
    places = {
        SubagentSource.USER: loaded.home / "subagents",
        SubagentSource.PROJECT: loaded.skills_project_dir / ".picobot" / "subagents",
    }
    wanted = {SubagentSource(s) for s in loaded.config.subagents.sources}
    return [(s, p) for s, p in places.items() if s in wanted]


def _usable(kind: SubagentType, tools: Collection[str], agents: Collection[str]) -> str | None:
    """Why the gateway cannot run `kind` (None: it can)."""
    if kind.allowed_tools is not None:
        unknown = sorted(
            t for t in kind.allowed_tools if t not in tools and not t.startswith(MCP_PREFIX)
        )
        if unknown:
            return f"allowed_tools names unknown tools: {', '.join(unknown)}"
    if kind.agent is not None and kind.agent not in agents:
        return f"no agent named {kind.agent!r}"
    return None


async def build_catalog(loaded: LoadedConfig, tools: Collection[str]) -> SubagentCatalog:
    """general, explore and (when `subagents.enabled`) the custom types that can
    run here; every skipped file is logged with the reason."""
    if not loaded.config.subagents.enabled:
        return SubagentCatalog()
    found = await asyncio.to_thread(scan, subagent_roots(loaded))
    for bad in found.invalid:
        log.warning("subagent_invalid", path=str(bad.path), reason=bad.reason)
    usable: list[SubagentType] = []
    for kind in found.types.values():
        problem = _usable(kind, tools, loaded.config.agents)
        if problem is None:
            usable.append(kind)
        else:
            log.warning("subagent_skipped", subagent=kind.name, path=str(kind.path), reason=problem)
    if usable:
        log.info("subagents_found", types=[k.name for k in usable])
    return SubagentCatalog(usable)
