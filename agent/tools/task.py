"""`task`: delegate a piece of work to a sub-agent and get its final text.

The tool only resolves the type and words the result; the run itself (child
session, tools, time limit, transcript) is the `SubagentService`'s
(gateway.tools.subagents). It bounds its own time (`max_execution_secs`), so the
registry's ordinary tool timeout does not apply to it.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from agent.providers.base import ToolSpec
from agent.subagents.catalog import SubagentCatalog
from agent.subagents.types import TASK_TOOL, SubagentTask
from agent.tools.base import Tool, ToolArgs, ToolContext, ToolError

__all__ = ["TaskTool"]


class TaskArgs(ToolArgs):
    description: str = Field(min_length=1, description="a short sentence")
    prompt: str = Field(min_length=1, description="detailed instructions")
    subagent_type: str = "general"


class TaskTool(Tool[TaskArgs]):
    name = TASK_TOOL
    description = (
        "Delegate self-contained work to a sub-agent with its own context; returns its "
        "final report. Task calls in one turn run at once."
    )
    Args = TaskArgs
    own_timeout: ClassVar[bool] = True

    def __init__(self, catalog: SubagentCatalog) -> None:
        self.catalog = catalog

    def spec(self) -> ToolSpec:
        base = super().spec()
        text = f"{self.description}\nsubagent_type:\n{self.catalog.describe()}"
        return ToolSpec(base.name, text, base.parameters)

    async def run(self, args: TaskArgs, ctx: ToolContext) -> str:
        service = ctx.services.subagents
        if service is None:
            raise ToolError("sub-agents are not available in this gateway")
        resolved = self.catalog.resolve(args.subagent_type)
        text = await service.run(SubagentTask(resolved.kind, args.description, args.prompt), ctx)
        if resolved.fell_back:
            return (
                f"(There is no sub-agent type {resolved.asked!r}; it ran as "
                f"{resolved.kind.name}.)\n\n{text}"
            )
        return text
