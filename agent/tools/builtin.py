"""The set of built-in tools and the registry the gateway builds from it.

This is the one place that lists every built-in tool. Tools read their limits
from `ToolContext.settings` at call time; `settings` here is accepted so the
wiring stays one call and future tools can be configured at construction.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agent.tools.base import Tool, ToolRegistry, ToolSettings
from agent.tools.calculator import CalculatorTool
from agent.tools.files import ReadTool
from agent.tools.get_time import GetTimeTool

__all__ = ["build_registry", "builtin_tools"]


def builtin_tools(settings: ToolSettings, timezone: str) -> list[Tool[Any]]:
    """Fresh instances of every built-in tool; `timezone` is get_time's default zone."""
    return [
        CalculatorTool(),
        GetTimeTool(timezone),
        ReadTool(),
    ]


def build_registry(
    settings: ToolSettings,
    timezone: str,
    disabled: Iterable[str] = (),
    timeout_secs: float = 120.0,
) -> ToolRegistry:
    """A registry of the built-in tools minus `disabled` (unknown names raise ValueError)."""
    tools = builtin_tools(settings, timezone)
    names = {t.name for t in tools}
    excluded = set(disabled)
    unknown = sorted(excluded - names)
    if unknown:
        raise ValueError(
            f"unknown tool name(s) in tools.disabled: {', '.join(unknown)} "
            f"(built-in tools: {', '.join(sorted(names))})"
        )
    return ToolRegistry([t for t in tools if t.name not in excluded], timeout_secs=timeout_secs)
