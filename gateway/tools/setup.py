"""The tools every agent is built from: their settings from the config, the
built-in registry, the gateway's own tools (memory, scheduler, skills,
send_session_message) where enabled, and the MCP servers as a per-turn source.
`tools.disabled` and `tools.approval` names were checked when the config loaded
(gateway/config/tool_names.py).
`ToolsFeature.build` is the composition root's one call: the skill runtime,
these tools, and `task` once the sub-agent types are known.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent.context import ContextPart
from agent.mcp.status import McpStatusPart
from agent.subagents.types import TASK_TOOL
from agent.tools.base import ToolRegistry, ToolSettings
from agent.tools.builtin import build_registry
from agent.tools.memory import MemoryManageTool, MemorySearchTool
from agent.tools.scheduler_manage import SchedulerManageTool
from agent.tools.session_message import SendSessionMessageTool
from agent.tools.task import TaskTool
from gateway.approvals.service import Approvals, TurnControls
from gateway.config.loading import LoadedConfig
from gateway.config.subagents import SubagentsConfig
from gateway.ops.hardening import resolve_sandbox
from gateway.ops.metrics import Metrics
from gateway.tools.mcp import build_mcp, mcp_details, mcp_metrics
from gateway.tools.skills import (
    SkillIndexPart,
    SkillRuntime,
    SkillToolKit,
    build_skill_runtime,
    skill_tool_kit,
)
from gateway.tools.subagents import SubagentRunner, build_catalog
from gateway.turns.agents import AgentDirectory
from gateway.turns.run_slots import RunSlots
from storage.store import Store

if TYPE_CHECKING:
    from agent.mcp.manager import McpManager

__all__ = ["ToolsFeature", "build_tools"]


def build_tools(
    loaded: LoadedConfig, skills: SkillToolKit, metrics: Metrics
) -> tuple[ToolSettings, ToolRegistry, McpManager | None]:
    """The settings, the registry, and the MCP manager (None without servers)."""
    cfg = loaded.config
    workspace = loaded.workspace
    workspace.mkdir(parents=True, exist_ok=True)
    tool_settings = ToolSettings(
        workspace=workspace,
        restrict_to_workspace=cfg.tools.restrict_to_workspace,
        read_max_bytes=cfg.tools.read_max_bytes,
        exec_timeout_secs=cfg.tools.exec_timeout_secs,
        exec_output_max_chars=cfg.tools.exec_output_max_chars,
        http_timeout_secs=cfg.tools.http.timeout_secs,
        http_max_bytes=cfg.tools.http.max_response_bytes,
        http_allow_private=cfg.tools.http.allow_private,
        shell_sandbox=resolve_sandbox(loaded),
        # received attachments are readable, never writable (channels store them there)
        read_roots=(
            *skills.read_roots,
            loaded.media_dir.resolve(),  # fixed now: `read` walks it without following links
        ),
    )
    registry = build_registry(
        tool_settings,
        cfg.time.timezone,
        cfg.tools.disabled,
        cfg.tools.timeout_secs,
        other_known=[
            "scheduler_manage",
            MemorySearchTool.name,
            MemoryManageTool.name,
            *skills.names,
            "skill_list",
            TASK_TOOL,
            SendSessionMessageTool.name,
        ],
    )
    if SendSessionMessageTool.name not in cfg.tools.disabled:
        sending = cfg.tools.send_session_message
        registry.register(SendSessionMessageTool(sending.allow_targets, sending.max_per_minute))
    for memory_tool in (MemorySearchTool(), MemoryManageTool()):
        if memory_tool.name not in cfg.tools.disabled:
            registry.register(memory_tool)
    if cfg.scheduler.enabled and "scheduler_manage" not in cfg.tools.disabled:
        registry.register(SchedulerManageTool())
    for tool in skills.tools:
        if tool.name not in cfg.tools.disabled:
            registry.register(tool)
    mcp = build_mcp(
        cfg.mcp_servers,
        disabled=cfg.tools.disabled,
        reserved=registry.names(),
        metrics=metrics,
        media_dir=loaded.media_dir,
    )
    if mcp is not None:
        registry.add_source(mcp)  # offered per turn: the tools of the servers up then
    return tool_settings, registry, mcp


@dataclass(frozen=True, slots=True)
class ToolsFeature:
    skills: SkillRuntime | None  # None when skills are off
    settings: ToolSettings
    registry: ToolRegistry
    mcp: McpManager | None  # None without servers

    @classmethod
    async def build(cls, loaded: LoadedConfig, store: Store, metrics: Metrics) -> ToolsFeature:
        skills = build_skill_runtime(loaded, store)
        if skills is not None:
            await skills.current()  # the first scan: invalid files are logged at start-up
        settings, registry, mcp = build_tools(loaded, skill_tool_kit(skills), metrics)
        catalog = await build_catalog(loaded, registry.names())
        if TASK_TOOL not in loaded.config.tools.disabled:
            registry.register(TaskTool(catalog))
        return cls(skills, settings, registry, mcp)

    def context_parts(self) -> list[ContextPart]:
        """The skill index and the MCP servers' status, where there are any."""
        parts: list[ContextPart] = [SkillIndexPart(self.skills)] if self.skills else []
        parts += [McpStatusPart(self.mcp)] if self.mcp is not None else []
        return parts

    @staticmethod
    def subagents(
        store: Store,
        agents: AgentDirectory,
        slots: RunSlots,
        config: SubagentsConfig,
        approvals: Approvals,
    ) -> SubagentRunner:
        """The `task` tool's runner: a child's held calls are refused, not paused."""
        return SubagentRunner(
            store,
            agents,
            slots=slots,
            slot_wait_secs=config.slot_wait_secs,
            default_max_execution_secs=config.default_max_execution_secs,
            control=TurnControls(approvals, can_pause=False),
        )

    @staticmethod
    def mcp_details(manager: McpManager | None) -> dict[str, object]:
        return mcp_details(manager)

    @staticmethod
    def mcp_metrics(manager: McpManager | None, metrics: Metrics) -> None:
        mcp_metrics(manager, metrics)
