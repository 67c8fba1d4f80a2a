"""The tool names a config may use in `tools.disabled` and `tools.approval.tools`,
checked when the config is loaded, so that `picobot doctor` and start-up refuse a
misspelt name with the same one line (a disabled tool that stays offered, or a
held tool that never asks, would fail silently).

The names are those of the built-in tools and of the tools the gateway adds
(gateway/tools/setup.py; tests/gateway/config/test_tool_names.py keeps the two
lists equal). `mcp_*` names are not checked: an MCP server says which tools it
has only once it is connected.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from agent.mcp.naming import PREFIX as MCP_PREFIX
from agent.subagents.types import TASK_TOOL
from agent.tools.builtin import BUILTIN_TOOL_NAMES, SHELL_ALIASES

__all__ = ["GATEWAY_TOOL_NAMES", "KNOWN_TOOL_NAMES", "unknown_tool_names"]

# the tools gateway/tools/setup.py registers besides the built-in ones
GATEWAY_TOOL_NAMES = frozenset(
    {
        "memory_search",
        "memory_manage",
        "scheduler_manage",
        "send_session_message",
        "skill_activate",
        "skill_manage",
        "skill_list",
        TASK_TOOL,
    }
)
KNOWN_TOOL_NAMES = BUILTIN_TOOL_NAMES | GATEWAY_TOOL_NAMES | SHELL_ALIASES


def unknown_tool_names(where: str, names: Iterable[str]) -> list[str]:
    """One problem line per name that is no tool, with the closest tool's name."""
    problems = []
    for name in sorted(set(names)):
        if name in KNOWN_TOOL_NAMES or name.startswith(MCP_PREFIX):
            continue
        close = difflib.get_close_matches(name, sorted(KNOWN_TOOL_NAMES), n=1)
        known = ", ".join(sorted(KNOWN_TOOL_NAMES - SHELL_ALIASES | {"bash"}))
        hint = f"did you mean {close[0]!r}?" if close else f"the tools: {known}, mcp_*"
        problems.append(f"{where}: no tool named {name!r} ({hint})")
    return problems
