"""Skill usage events and where they go (the `skill_events` table, wired by
the composition root through `SkillEventSink`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

__all__ = ["SkillEvent", "SkillEventKind", "SkillEventSink"]


class SkillEventKind(StrEnum):
    DISCOVERED = "discovered"  # new or changed on disk (every skill at start-up)
    INVALID = "invalid"  # a SKILL.md skipped; detail says why
    ACTIVATED = "activated"
    CREATED = "created"
    UPDATED = "updated"
    DELETED = "deleted"
    DISABLED = "disabled"
    ENABLED = "enabled"


@dataclass(frozen=True, slots=True)
class SkillEvent:
    kind: SkillEventKind
    skill: str
    source: str | None = None
    path: str | None = None
    session_id: str | None = None
    channel: str | None = None
    chat_id: str | None = None
    detail: str | None = None


class SkillEventSink(Protocol):
    async def record(self, events: Sequence[SkillEvent]) -> None: ...
