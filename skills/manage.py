"""What `skill_manage` does on disk: create, update and delete a skill's
folder (only in the `user` and `project` sources), and the state-file edits
of `disable` / `enable`. Blocking file I/O: call from a worker thread.

Never writes or deletes outside the skill's folder: the root is walked from
`/` without following a link (agent.tools.confined), the folder and its
SKILL.md are opened relative to it, and `delete` removes only a real
directory (not a link) of the root that holds a regular SKILL.md.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from pydantic import Field

from agent.tools.base import ToolArgs, ToolError
from agent.tools.confined import ConfinedError, open_beneath, open_dir, write_atomic_in
from skills.model import NAME_PATTERN, SKILL_FILE, Skill, SkillSource
from skills.parse import MAX_DESCRIPTION_CHARS, render_skill
from skills.roots import SkillRoots

__all__ = [
    "Scope",
    "SkillManageArgs",
    "create_skill",
    "delete_skill",
    "scope_source",
    "update_skill",
]

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


@contextlib.contextmanager
def _confined(action: str, name: str) -> Iterator[None]:
    """File-system refusals as a tool error naming what was refused."""
    try:
        yield
    except ConfinedError as exc:
        raise ToolError(f"cannot {action} skill {name!r}: {exc}") from None
    except OSError as exc:
        raise ToolError(f"cannot {action} skill {name!r}: {exc.strerror or exc}") from None


def _folder_fd(root_fd: int, root: Path, name: str, *, create: bool = False) -> int:
    if create:
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o755, dir_fd=root_fd)
    return open_beneath(root_fd, name, os.O_RDONLY | os.O_DIRECTORY, where=root)


def _write_skill_file(root: Path, name: str, text: str, *, new: bool) -> Path:
    root_fd = open_dir(root, create=new)
    try:
        folder_fd = _folder_fd(root_fd, root, name, create=new)
    finally:
        os.close(root_fd)
    try:
        if new:
            try:
                os.stat(SKILL_FILE, dir_fd=folder_fd, follow_symlinks=False)
            except FileNotFoundError:
                pass
            else:
                raise ToolError(f"skill {name!r} already exists; use action 'update'")
        write_atomic_in(folder_fd, SKILL_FILE, text.encode("utf-8"))
    finally:
        os.close(folder_fd)
    return root / name / SKILL_FILE


def create_skill(
    roots: SkillRoots, source: SkillSource, name: str, description: str, body: str
) -> Path:
    root = roots.dir_of(source)
    if root is None:
        raise ToolError(f"the {source.value!r} skill source is not enabled (skills.sources)")
    with _confined("create", name):
        return _write_skill_file(root, name, render_skill(name, description, body), new=True)


def update_skill(skill: Skill, description: str | None, body: str | None) -> Path:
    refuse_read_only(skill)
    if description is None and body is None:
        raise ToolError("update needs a new 'description', 'body' or both")
    text = skill.body if body is None else body
    desc = skill.description if description is None else check_description(description)
    extra = {k: v for k, v in skill.metadata.items() if k not in ("name", "description")}
    with _confined("update", skill.name):
        return _write_skill_file(
            skill.folder.parent,
            skill.folder.name,
            render_skill(skill.name, desc, text, extra),
            new=False,
        )


def delete_skill(skill: Skill) -> Path:
    refuse_read_only(skill)
    root, name = skill.folder.parent, skill.folder.name
    with _confined("delete", skill.name):
        root_fd = open_dir(root)
        try:
            if stat.S_ISLNK(os.stat(name, dir_fd=root_fd, follow_symlinks=False).st_mode):
                raise ToolError(f"skill {skill.name!r} is a symbolic link; remove it by hand")
            folder_fd = _folder_fd(root_fd, root, name)
            try:
                info = os.stat(SKILL_FILE, dir_fd=folder_fd, follow_symlinks=False)
            finally:
                os.close(folder_fd)
            if not stat.S_ISREG(info.st_mode):
                raise ToolError(f"{skill.path} is not a regular file; remove the skill by hand")
            # fd-based: refuses a link at `name` and never leaves the folder
            shutil.rmtree(name, dir_fd=root_fd)
        finally:
            os.close(root_fd)
    return skill.folder
