"""Wiring of the skill runtime (skills/): the index as a context part, usage
events into storage, and the runtime built from the `skills` config section.

The one place that knows both skills/ and storage/, so neither imports the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.context import TurnFacts
from agent.messages import Marker
from agent.tools.base import Tool
from gateway.config.loading import LoadedConfig
from skills.discovery import SkillRoots
from skills.events import SkillEvent
from skills.index import IndexLimits
from skills.model import SkillSource
from skills.runtime import SkillRuntime
from skills.tools import SKILL_TOOL_NAMES, skill_tools
from storage.sql.skill_events import SkillEventRow
from storage.store import Store

__all__ = [
    "SkillIndexPart",
    "SkillRuntime",  # re-exported: gateway.tools.setup holds one, and may not import skills/
    "SkillToolKit",
    "StoreSkillEvents",
    "build_skill_runtime",
    "skill_roots",
    "skill_tool_kit",
]


@dataclass(frozen=True, slots=True)
class SkillToolKit:
    """What the tool set takes from the skills (gateway.tools.setup)."""

    names: tuple[str, ...]  # always known to `tools.disabled`, skills on or off
    tools: tuple[Tool[Any], ...]  # offered: none while skills are off
    read_roots: tuple[Path, ...]  # the skill folders `read` may open (fixed at start)


def skill_tool_kit(runtime: SkillRuntime | None) -> SkillToolKit:
    if runtime is None:
        return SkillToolKit(SKILL_TOOL_NAMES, (), ())
    roots = tuple(path for _, path in runtime.roots.dirs)
    return SkillToolKit(SKILL_TOOL_NAMES, tuple(skill_tools()), roots)


class SkillIndexPart:
    """The skill index, sent with every turn and never stored (docs/skills.md)."""

    def __init__(self, runtime: SkillRuntime) -> None:
        self.name = "skill_index"
        self.marker: Marker | None = Marker.SKILL_INDEX
        self._runtime = runtime

    async def render(self, turn: TurnFacts) -> str | None:
        return await self._runtime.index_text()


class StoreSkillEvents:
    def __init__(self, store: Store) -> None:
        self._store = store

    async def record(self, events: Sequence[SkillEvent]) -> None:
        await self._store.record_skill_events(
            [
                SkillEventRow(
                    e.kind.value,
                    e.skill,
                    e.source,
                    e.path,
                    e.session_id,
                    e.channel,
                    e.chat_id,
                    e.detail,
                )
                for e in events
            ]
        )


def skill_roots(loaded: LoadedConfig, user_home: Path | None = None) -> SkillRoots:
    """`user_home`: where `~/.agents` and `~/.openclaw` are (default: the real home).
    The roots are fixed here, once (skills/roots.py): a link planted later in
    the workspace or the project is never followed."""
    return SkillRoots.build(
        loaded.home,
        Path.home() if user_home is None else user_home,
        loaded.skills_project_dir,
        [SkillSource(s) for s in loaded.config.skills.sources],
        workspace=loaded.workspace,
    )


def build_skill_runtime(
    loaded: LoadedConfig, store: Store | None, user_home: Path | None = None
) -> SkillRuntime | None:
    """None when `skills.enabled` is false: no index, no skill tools."""
    cfg = loaded.config.skills
    if not cfg.enabled:
        return None
    return SkillRuntime(
        skill_roots(loaded, user_home),
        IndexLimits(cfg.max_index_chars, cfg.max_listed_skills),
        StoreSkillEvents(store) if store is not None else None,
        check_interval_secs=cfg.check_interval_secs,
    )
