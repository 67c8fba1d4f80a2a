"""The `skills` config section (docs/skills.md), re-exported by gateway.config.core."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from gateway.config.agents import FrozenModel

__all__ = ["SkillSourceName", "SkillsConfig"]

SkillSourceName = Literal[
    "user", "user_agent", "user_openclaw", "project", "project_agent", "project_openclaw"
]
ALL_SOURCES: list[SkillSourceName] = [
    "user",
    "user_agent",
    "user_openclaw",
    "project",
    "project_agent",
    "project_openclaw",
]


class SkillsConfig(FrozenModel):
    enabled: bool = True
    # which of the six sources to read (precedence is always the fixed order)
    sources: list[SkillSourceName] = Field(default_factory=lambda: list(ALL_SOURCES))
    # <project> of the project sources; default: the tools workspace
    project_dir: str | None = None
    max_index_chars: int = Field(4_000, ge=200, le=100_000)
    max_listed_skills: int = Field(32, ge=1, le=1_000)
    # how often a turn looks at the skill folders for changes (0: every turn);
    # between looks turns use the index they have, without a thread hop
    check_interval_secs: float = Field(1.0, ge=0)

    @field_validator("sources")
    @classmethod
    def _no_repeats(cls, value: list[SkillSourceName]) -> list[SkillSourceName]:
        if len(set(value)) != len(value):
            raise ValueError("a source is listed twice")
        return value
