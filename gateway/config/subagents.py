"""The `subagents` section and `tools.send_session_message` (docs/subagents.md),
re-exported by gateway.config.core."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from gateway.config.agents import FrozenModel

__all__ = ["SessionMessageToolConfig", "SubagentSourceName", "SubagentsConfig"]

SubagentSourceName = Literal["user", "project"]


def _both() -> list[SubagentSourceName]:
    return ["user", "project"]


class SubagentsConfig(FrozenModel):
    # custom SUBAGENT.md types; general and explore are always there
    enabled: bool = True
    sources: list[SubagentSourceName] = Field(default_factory=_both)
    # sub-agents running at once across the gateway (task calls beyond wait)
    max_concurrent: int = Field(4, ge=1, le=64)
    default_max_execution_secs: float = Field(600.0, gt=0)
    # how long a task call waits for a run slot before it is an error result
    slot_wait_secs: float = Field(120.0, gt=0)

    @field_validator("sources")
    @classmethod
    def _no_repeats(cls, value: list[SubagentSourceName]) -> list[SubagentSourceName]:
        if len(set(value)) != len(value):
            raise ValueError("a source is listed twice")
        return value


_TARGET = re.compile(r"[a-z_]+:.+")


class SessionMessageToolConfig(FrozenModel):
    # "channel:chat_id" entries any chat's agent may message (admins may message any)
    allow_targets: list[str] = Field(default_factory=list)
    max_per_minute: int = Field(6, ge=1, le=600)  # per sender and per target chat

    @field_validator("allow_targets")
    @classmethod
    def _targets(cls, value: list[str]) -> list[str]:
        bad = [t for t in value if not _TARGET.fullmatch(t)]
        if bad:
            raise ValueError(f"each target is 'channel:chat_id', got {bad[0]!r}")
        return value
