"""`execute_batch` tells a watcher when each call starts and ends (tool progress)."""

from __future__ import annotations

import asyncio
from typing import ClassVar

from agent.messages import ToolCall
from agent.tools.base import Tool, ToolArgs, ToolContext, ToolRegistry, ToolResult


class _Args(ToolArgs):
    name: str


class GateTool(Tool[_Args]):
    """Waits for its gate, so a test sees calls of one batch overlap."""

    name: ClassVar[str] = "gate"
    description: ClassVar[str] = "waits"
    Args: ClassVar[type[ToolArgs]] = _Args

    def __init__(self) -> None:
        self.gates: dict[str, asyncio.Event] = {}

    async def run(self, args: _Args, ctx: ToolContext) -> str:
        await self.gates.setdefault(args.name, asyncio.Event()).wait()
        return f"done {args.name}"


class Recorder:
    def __init__(self, tool: GateTool, fail: bool = False) -> None:
        self.tool = tool
        self.fail = fail
        self.events: list[tuple[str, str, bool | None]] = []

    async def tool_started(self, call: ToolCall) -> None:
        self.events.append(("start", call.id, None))
        if len([e for e in self.events if e[0] == "start"]) == 2:
            for gate in ("a", "b"):  # both are running: let b end first, then a
                self.tool.gates.setdefault(gate, asyncio.Event())
            self.tool.gates["b"].set()
        if self.fail:
            raise RuntimeError("display broke")

    async def tool_finished(self, result: ToolResult, secs: float) -> None:
        assert secs >= 0
        self.events.append(("end", result.call.id, result.ok))
        if result.call.id == "2":
            self.tool.gates["a"].set()
        if self.fail:
            raise RuntimeError("display broke")


def calls() -> list[ToolCall]:
    return [ToolCall("1", "gate", '{"name": "a"}'), ToolCall("2", "gate", '{"name": "b"}')]


async def test_each_call_of_a_batch_is_reported_as_it_starts_and_ends(ctx: ToolContext) -> None:
    tool = GateTool()
    recorder = Recorder(tool)
    results = await ToolRegistry([tool]).execute_batch(calls(), ctx, recorder)
    assert [r.content for r in results] == ["done a", "done b"]  # in call order
    assert recorder.events == [
        ("start", "1", None),
        ("start", "2", None),
        ("end", "2", True),
        ("end", "1", True),
    ]


async def test_a_failing_watcher_never_fails_the_calls(ctx: ToolContext) -> None:
    tool = GateTool()
    results = await ToolRegistry([tool]).execute_batch(calls(), ctx, Recorder(tool, fail=True))
    assert [(r.ok, r.content) for r in results] == [(True, "done a"), (True, "done b")]


async def test_an_unknown_tool_is_reported_as_an_error(ctx: ToolContext) -> None:
    recorder = Recorder(GateTool())
    [result] = await ToolRegistry([]).execute_batch([ToolCall("9", "nope", "{}")], ctx, recorder)
    assert not result.ok
    assert recorder.events == [("start", "9", None), ("end", "9", False)]
