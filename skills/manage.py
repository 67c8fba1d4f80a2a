"""What `skill_manage` does on disk: create, update and delete a skill's
folder (only in the `user` and `project` sources), and the state-file edits
of `disable` / `enable`. Blocking file I/O: call from a worker thread.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Literal

from pydantic import Field

from agent.tools.base import ToolArgs, ToolError
from skills.discovery import SkillRoots
from skills.model import NAME_PATTERN, SKILL_FILE, Skill, SkillSource
from skills.parse import MAX_DESCRIPTION_CHARS, render_skill
from skills.state import write_atomic

__all__ = ["SkillManageArgs", "create_skill", "delete_skill", "scope_source", "update_skill"]

Scope = Literal["user", "project"]


class SkillManageArgs(ToolArgs):
    action: Literal["list", "get", "create", "update", "delete", "disable", "enable", "reload"]
    name: str | None = None
    names: list[str] | None = None
    description: str | None = Field(None, description="one line: when to use it")
    body: str | None = Field(None, description="Markdown")
    scope: Scope | None = Field(None, description="default: project")


def scope_source(scope: Scope | None) -> SkillSource:
    return SkillSource.USER if scope == "user" else SkillSource.PROJECT


def check_name(name: str | None) -> str:
    if name is None or not NAME_PATTERN.fullmatch(name):
        raise ToolError(
            "a skill name is 1-64 characters: lowercase letters, digits and '-', "
            "not starting with '-'"
        )
    return name


def check_description(text: str | None) -> str:
    if text is None or not text.strip():
        raise ToolError("a skill needs a 'description' (one line: when to use it)")
    if len(text) > MAX_DESCRIPTION_CHARS:
        raise ToolError(f"'description' is longer than {MAX_DESCRIPTION_CHARS} characters")
    return " ".join(text.split())


def refuse_read_only(skill: Skill) -> None:
    if skill.source is SkillSource.BUILTIN:
        raise ToolError(f"skill {skill.name!r} is built in and read-only")
    if not skill.writable:
        raise ToolError(
            f"skill {skill.name!r} comes from the {skill.source.value!r} source; skill_manage "
            "writes only user and project skills"
        )


def create_skill(
    roots: SkillRoots, source: SkillSource, name: str, description: str, body: str
) -> Path:
    root = roots.dir_of(source)
    if root is None:
        raise ToolError(f"the {source.value!r} skill source is not enabled (skills.sources)")
    path = root / name / SKILL_FILE
    if path.exists():
        raise ToolError(f"skill {name!r} already exists in {source.value}; use action 'update'")
    write_atomic(path, render_skill(name, description, body))
    return path


def update_skill(skill: Skill, description: str | None, body: str | None) -> Path:
    refuse_read_only(skill)
    if description is None and body is None:
        raise ToolError("update needs a new 'description', 'body' or both")
    text = skill.body if body is None else body
    desc = skill.description if description is None else check_description(description)
    extra = {k: v for k, v in skill.metadata.items() if k not in ("name", "description")}
    write_atomic(skill.path, render_skill(skill.name, desc, text, extra))
    return skill.path


def delete_skill(skill: Skill) -> Path:
    refuse_read_only(skill)
    if skill.folder.is_symlink():
        raise ToolError(f"skill {skill.name!r} is a symbolic link; remove it by hand")
    shutil.rmtree(skill.folder)
    return skill.folder
