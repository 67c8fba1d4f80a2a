from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.tools.base import ToolContext, ToolError, ToolSettings
from skills.events import SkillEvent
from skills.index import IndexLimits
from skills.manage import SkillManageArgs
from skills.model import SkillSource
from skills.runtime import SkillRuntime
from tests.skills.helpers import layout, write_skill


class _Events:
    def __init__(self) -> None:
        self.seen: list[SkillEvent] = []

    async def record(self, events: list[SkillEvent]) -> None:
        self.seen.extend(events)


def _ctx(workspace: Path) -> ToolContext:
    return ToolContext("s1", "websocket", "c1", "u1", ToolSettings(workspace))


async def test_enable_undoes_disable_in_the_same_scope(tmp_path: Path) -> None:
    lay = layout(tmp_path)
    write_skill(lay.skill_dir(SkillSource.USER), "alpha", "a")
    sink = _Events()
    runtime = SkillRuntime(lay.roots(), IndexLimits(), sink)
    ctx = _ctx(lay.project)
    said = await runtime.manage(
        SkillManageArgs(action="disable", scope="user", names=["alpha", "ghost"]), ctx
    )
    assert "Not found now (kept in the file): ghost" in said
    assert "alpha" not in (await runtime.current()).skills
    with pytest.raises(ToolError, match="no skill named 'alpha'"):
        await runtime.activate("alpha", ctx)
    await runtime.manage(SkillManageArgs(action="enable", scope="user", names=["alpha"]), ctx)
    state = json.loads((lay.picobot_home / "skill-state.json").read_text())
    assert state == {"disabled_skills": ["ghost"]}
    assert "alpha" in (await runtime.current()).skills
    kinds = [
        (e.kind.value, e.skill, e.session_id) for e in sink.seen if e.kind.value != "discovered"
    ]
    assert kinds == [
        ("disabled", "alpha", "s1"),
        ("disabled", "ghost", "s1"),
        ("enabled", "alpha", "s1"),
    ]


async def test_a_skill_from_a_read_only_source_is_not_written(tmp_path: Path) -> None:
    lay = layout(tmp_path)
    write_skill(lay.skill_dir(SkillSource.USER_OPENCLAW), "theirs", "not ours")
    runtime = SkillRuntime(lay.roots(), IndexLimits())
    with pytest.raises(ToolError, match="'user_openclaw' source"):
        await runtime.manage(SkillManageArgs(action="delete", name="theirs"), _ctx(lay.project))
    assert (lay.skill_dir(SkillSource.USER_OPENCLAW) / "theirs" / "SKILL.md").exists()
