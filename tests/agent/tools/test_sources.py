"""ToolRegistry with a ToolSource: tools that come and go are offered per call of
specs(), narrowed by a channel's allow/deny like any other, and called through it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent.messages import ToolCall
from agent.providers.base import ToolSpec
from agent.tools.base import ToolContext, ToolError, ToolRegistry, ToolSettings
from agent.tools.calculator import CalculatorTool


class LiveTools:
    """A ToolSource whose tool set the test changes between turns."""

    def __init__(self) -> None:
        self.offered: list[str] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def specs(self) -> Sequence[ToolSpec]:
        return [
            ToolSpec(n, f"the {n} tool", {"type": "object", "properties": {}}) for n in self.offered
        ]

    def owns(self, name: str) -> bool:
        return name.startswith("mcp_")

    async def call(self, name: str, arguments: dict[str, Any], ctx: ToolContext) -> str:
        self.calls.append((name, arguments))
        if name not in self.offered:
            raise ToolError(f"{name} is unavailable")
        return f"{name} ran"


def _ctx(tmp_path: Path) -> ToolContext:
    return ToolContext("s", "websocket", "c", "u", ToolSettings(workspace=tmp_path))


def _names(registry: ToolRegistry) -> list[str]:
    return [s.name for s in registry.specs()]


async def test_source_tools_are_read_on_every_specs_call(tmp_path: Path) -> None:
    live = LiveTools()
    registry = ToolRegistry([CalculatorTool()])
    registry.add_source(live)
    assert _names(registry) == ["calculator"]
    live.offered = ["mcp_fs_echo"]
    assert _names(registry) == ["calculator", "mcp_fs_echo"]
    result = await registry.execute(ToolCall("1", "mcp_fs_echo", '{"text": "hi"}'), _ctx(tmp_path))
    assert (result.ok, result.content) == (True, "mcp_fs_echo ran")
    assert live.calls == [("mcp_fs_echo", {"text": "hi"})]


async def test_a_source_error_is_an_error_result_for_the_model(tmp_path: Path) -> None:
    registry = ToolRegistry()
    registry.add_source(LiveTools())
    result = await registry.execute(ToolCall("1", "mcp_fs_echo", "{}"), _ctx(tmp_path))
    assert (result.ok, result.content) == (False, "Error: mcp_fs_echo is unavailable")
    result = await registry.execute(ToolCall("2", "mcp_fs_echo", "[1]"), _ctx(tmp_path))
    assert result.content == "Error: arguments must be a JSON object"


async def test_channel_allow_and_deny_narrow_source_tools_too(tmp_path: Path) -> None:
    live = LiveTools()
    live.offered = ["mcp_fs_echo", "mcp_fs_write", "mcp_web_search"]
    registry = ToolRegistry([CalculatorTool()])
    registry.add_source(live)
    narrow = registry.narrowed(["calculator", "mcp_fs_echo", "mcp_fs_write"], ["mcp_fs_write"])
    assert _names(narrow) == ["calculator", "mcp_fs_echo"]
    narrower = narrow.narrowed(None, ["calculator"])
    assert _names(narrower) == ["mcp_fs_echo"]
    refused = await narrow.execute(ToolCall("1", "mcp_web_search", "{}"), _ctx(tmp_path))
    assert refused.content == "Error: unknown tool 'mcp_web_search'"
    assert live.calls == []
    assert _names(registry.narrowed(None, ["mcp_web_search"])) == [
        "calculator",
        "mcp_fs_echo",
        "mcp_fs_write",
    ]
