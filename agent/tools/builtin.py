"""The set of built-in tools and the registry the gateway builds from it.

This is the one place that lists every built-in tool. Tools read their limits
from `ToolContext.settings` at call time; `settings` here is accepted so the
wiring stays one call and future tools can be configured at construction.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agent.mcp.naming import PREFIX as MCP_PREFIX
from agent.tools.base import Tool, ToolRegistry, ToolSettings
from agent.tools.calculator import CalculatorTool
from agent.tools.files import EditTool, ReadTool, WriteTool
from agent.tools.get_time import GetTimeTool
from agent.tools.send_file import SendFileTool
from agent.tools.shell import ShellTool
from agent.tools.web import HttpRequestTool, WebFetchTool

__all__ = ["BUILTIN_TOOL_NAMES", "SHELL_ALIASES", "build_registry", "builtin_tools"]

# The spec names the shell tool `bash` on Unix and `shell` on Windows; a config
# written on one platform must keep working on the other.
SHELL_ALIASES = frozenset({"bash", "shell"})

_BUILTIN_CLASSES: tuple[type[Tool[Any]], ...] = (
    CalculatorTool,
    GetTimeTool,
    ReadTool,
    WriteTool,
    EditTool,
    ShellTool,
    HttpRequestTool,
    WebFetchTool,
    SendFileTool,
)
# What a config may name before any tool exists (gateway.config checks names at load)
BUILTIN_TOOL_NAMES = frozenset(cls.name for cls in _BUILTIN_CLASSES)


def builtin_tools(settings: ToolSettings, timezone: str) -> list[Tool[Any]]:
    """Fresh instances of every built-in tool; `timezone` is get_time's default zone."""
    return [
        CalculatorTool(),
        GetTimeTool(timezone),
        ReadTool(),
        WriteTool(),
        EditTool(),
        ShellTool(),
        HttpRequestTool(),
        WebFetchTool(),
        SendFileTool(),
    ]


def build_registry(
    settings: ToolSettings,
    timezone: str,
    disabled: Iterable[str] = (),
    timeout_secs: float = 120.0,
    *,
    other_known: Iterable[str] = (),
) -> ToolRegistry:
    """A registry of the built-in tools minus `disabled`.

    A name in `disabled` that is neither built in nor in `other_known` (tools the
    caller registers elsewhere, e.g. memory_search, scheduler_manage, task; the
    caller applies `disabled` to those itself) raises ValueError naming it.
    `mcp_*` names are not checked: MCP servers say which tools they have only
    once they are connected (the MCP manager applies `disabled` to them).
    """
    tools = builtin_tools(settings, timezone)
    names = {t.name for t in tools}
    excluded = set(disabled)
    if excluded & SHELL_ALIASES:
        excluded |= SHELL_ALIASES
    unknown = sorted(
        n
        for n in excluded - names - SHELL_ALIASES - set(other_known)
        if not n.startswith(MCP_PREFIX)
    )
    if unknown:
        raise ValueError(
            f"unknown tool name(s) in tools.disabled: {', '.join(unknown)} "
            f"(known tools: {', '.join(sorted(names | set(other_known)))})"
        )
    return ToolRegistry([t for t in tools if t.name not in excluded], timeout_secs=timeout_secs)
