"""The task tool in a registry: its own time limit instead of tools.timeout_secs,
the call id it runs under, and a service that is not there."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from agent.messages import ToolCall
from agent.subagents.catalog import SubagentCatalog
from agent.subagents.types import SubagentTask
from agent.tools.base import ToolContext, ToolRegistry, ToolServices
from agent.tools.task import TaskTool
from tests.agent.tools.conftest import MakeCtx


class SlowService:
    """Finishes well after the registry's timeout, when the test says so."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None]] = []

    async def run(self, task: SubagentTask, ctx: ToolContext) -> str:
        self.seen.append((task.kind.name, ctx.call_id))
        done = asyncio.Event()
        asyncio.get_running_loop().call_later(0.3, done.set)
        await done.wait()
        return "child text"


CALL = ToolCall("call-1", "task", '{"description": "d", "prompt": "p", "subagent_type": "explore"}')


async def test_task_is_exempt_from_the_tool_timeout_and_gets_its_call_id(
    make_ctx: MakeCtx,
) -> None:
    service = SlowService()
    registry = ToolRegistry([TaskTool(SubagentCatalog())], timeout_secs=0.05)
    ctx = replace(make_ctx(), services=ToolServices(subagents=service))
    result = await registry.execute(CALL, ctx)
    assert (result.ok, result.content) == (True, "child text")
    assert service.seen == [("explore", "call-1")]
    assert ctx.call_id is None  # the shared context is not changed


async def test_without_the_service_the_model_is_told(make_ctx: MakeCtx) -> None:
    result = await ToolRegistry([TaskTool(SubagentCatalog())]).execute(CALL, make_ctx())
    assert result.content == "Error: sub-agents are not available in this gateway"
