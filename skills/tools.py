"""The skill tools. They reach the runtime through `ToolServices.skills`
(the `SkillService` protocol); absent it, they say so."""

from __future__ import annotations

from typing import ClassVar

from agent.tools.base import SkillService, Tool, ToolArgs, ToolContext, ToolError
from skills.manage import SkillManageArgs

__all__ = ["SKILL_TOOL_NAMES", "SkillActivateTool", "SkillManageTool", "skill_tools"]

SKILL_TOOL_NAMES = ("skill_activate", "skill_manage")


def _service(ctx: ToolContext) -> SkillService:
    if ctx.services.skills is None:
        raise ToolError("skills are not available in this gateway")
    return ctx.services.skills


class SkillActivateArgs(ToolArgs):
    name: str


class SkillActivateTool(Tool[SkillActivateArgs]):
    name: ClassVar[str] = "skill_activate"
    description: ClassVar[str] = (
        "Load a skill from the skill index: its instructions and its files' paths."
    )
    Args: ClassVar[type[ToolArgs]] = SkillActivateArgs

    async def run(self, args: SkillActivateArgs, ctx: ToolContext) -> str:
        return await _service(ctx).activate(args.name, ctx)


class SkillManageTool(Tool[SkillManageArgs]):
    name: ClassVar[str] = "skill_manage"
    description: ClassVar[str] = (
        "Manage skills: list; get, delete {name}; create {name, description, body, scope?}; "
        "update {name, description?, body?}; disable, enable {names, scope?}; reload. "
        "Only user and project skills are writable."
    )
    Args: ClassVar[type[ToolArgs]] = SkillManageArgs

    async def run(self, args: SkillManageArgs, ctx: ToolContext) -> str:
        return await _service(ctx).manage(args, ctx)


def skill_tools() -> list[Tool[SkillActivateArgs] | Tool[SkillManageArgs]]:
    return [SkillActivateTool(), SkillManageTool()]
