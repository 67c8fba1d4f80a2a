"""What a skill is: its source, its parsed SKILL.md, and the naming rule."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

__all__ = [
    "BUILTIN_DIR",
    "NAME_PATTERN",
    "SKILL_FILE",
    "SOURCE_ORDER",
    "WRITABLE_SOURCES",
    "Skill",
    "SkillSource",
]

SKILL_FILE = "SKILL.md"
BUILTIN_DIR = Path(__file__).resolve().parent / "builtin"
NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")


class SkillSource(StrEnum):
    BUILTIN = "builtin"
    USER = "user"
    USER_AGENT = "user_agent"
    USER_OPENCLAW = "user_openclaw"
    PROJECT = "project"
    PROJECT_AGENT = "project_agent"
    PROJECT_OPENCLAW = "project_openclaw"


# Lowest precedence first: a later source overrides a same-named skill.
SOURCE_ORDER = tuple(SkillSource)
# Where skill_manage may create, update and delete (scope "user" / "project").
WRITABLE_SOURCES = frozenset({SkillSource.USER, SkillSource.PROJECT})


@dataclass(frozen=True, slots=True)
class Skill:
    name: str
    description: str
    body: str  # SKILL.md without its front matter
    folder: Path
    source: SkillSource
    # every front-matter field, unknown ones included (name and description too)
    metadata: Mapping[str, object] = field(default_factory=dict)
    # what was forgiven to load it (a description cut, YAML read leniently)
    warning: str | None = None

    @property
    def path(self) -> Path:
        return self.folder / SKILL_FILE

    @property
    def writable(self) -> bool:
        return self.source in WRITABLE_SOURCES
