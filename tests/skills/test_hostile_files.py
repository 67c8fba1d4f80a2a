"""Hostile skill files and roots (issue 51): a FIFO, a link to /dev/zero, a
huge file or a YAML alias bomb as SKILL.md degrades that skill only; a skill
root swapped for a link is refused; skill_manage never writes or deletes
outside its skill folder; a slow scan never holds up a turn."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from agent.front_matter import FrontMatterError, parse_front_matter
from agent.tools.base import ToolContext, ToolError, ToolSettings
from skills import runtime as runtime_module
from skills.discovery import MAX_SKILL_BYTES, Scan, SkillRoots, scan
from skills.index import IndexLimits
from skills.manage import SkillManageArgs, delete_skill
from skills.model import SkillSource
from skills.runtime import SkillRuntime
from tests.skills.helpers import BOMB, layout, write_skill


def test_yaml_aliases_and_anchors_are_refused_at_once() -> None:
    started = time.monotonic()
    with pytest.raises(FrontMatterError, match="alias or anchor"):
        parse_front_matter(BOMB)
    assert time.monotonic() - started < 0.5
    with pytest.raises(FrontMatterError, match="alias or anchor"):
        parse_front_matter("---\ndescription: &d hi\n---\n")
    with pytest.raises(FrontMatterError, match="nested deeper"):
        parse_front_matter("---\ndescription: x\nd: " + "[" * 40 + "]" * 40 + "\n---\n")
    assert parse_front_matter("---\ndescription: fine\ntags: [a, b]\n---\nbody")[0] == {
        "description": "fine",
        "tags": ["a", "b"],
    }


def _hostile(root: Path) -> dict[str, str]:
    """Four bad SKILL.md files beside a good one; name → expected reason."""
    write_skill(root, "good", "a fine skill")
    for name in ("fifo", "zero", "huge", "bomb"):
        (root / name).mkdir(parents=True)
    os.mkfifo(root / "fifo" / "SKILL.md")
    (root / "zero" / "SKILL.md").symlink_to("/dev/zero")
    with (root / "huge" / "SKILL.md").open("wb") as f:
        f.truncate(300_000_000)
    (root / "bomb" / "SKILL.md").write_text(BOMB)
    return {
        "fifo": "not a regular file",
        "zero": "is a symbolic link",
        "huge": f"larger than {MAX_SKILL_BYTES} bytes",
        "bomb": "alias or anchor",
    }


async def test_hostile_skill_files_are_invalid_and_the_rest_works(tmp_path: Path) -> None:
    lay = layout(tmp_path)
    root = lay.skill_dir(SkillSource.PROJECT)
    expected = _hostile(root)
    async with asyncio.timeout(10):
        found = await asyncio.to_thread(scan, lay.roots())
    assert "good" in found.skills
    reasons = {bad.path.parent.name: bad.reason for bad in found.invalid}
    assert set(reasons) == set(expected)
    for name, reason in expected.items():
        assert reason in reasons[name], reasons[name]


def test_a_root_that_is_a_link_is_refused_with_one_problem(tmp_path: Path) -> None:
    lay = layout(tmp_path)
    roots = lay.roots()
    agents = lay.project.resolve() / ".agents"
    agents.mkdir(parents=True)
    (agents / "skills").symlink_to(lay.picobot_home.resolve() / "skills")
    write_skill(lay.picobot_home / "skills", "mine", "user skill")
    found = scan(roots)
    assert found.skills["mine"].source is SkillSource.USER  # not twice, not as project_agent
    assert any(".agents/skills is a symbolic link" in r for r in found.refused)


def test_a_user_home_root_that_is_a_link_is_followed_once_at_start(tmp_path: Path) -> None:
    lay = layout(tmp_path)
    elsewhere = tmp_path / "dotfiles" / "skills"
    write_skill(elsewhere, "dot", "from dotfiles")
    (lay.user_home / ".agents").mkdir(parents=True)
    (lay.user_home / ".agents" / "skills").symlink_to(elsewhere)
    assert scan(lay.roots()).skills["dot"].source is SkillSource.USER_AGENT


def _ctx(workspace: Path) -> ToolContext:
    return ToolContext("s1", "websocket", "c1", "u1", ToolSettings(workspace))


async def test_skill_manage_through_a_linked_root_leaves_the_home_intact(tmp_path: Path) -> None:
    """`ln -s ../.. .picobot/skills`, then create and delete `storage`."""
    lay = layout(tmp_path)
    storage = lay.picobot_home / "storage"
    storage.mkdir(parents=True)
    (storage / "sessions.db").write_text("every chat")
    runtime = SkillRuntime(lay.roots(), IndexLimits())
    await runtime.current()
    (lay.project / ".picobot").mkdir(parents=True)
    (lay.project / ".picobot" / "skills").symlink_to(lay.picobot_home)
    ctx = _ctx(lay.project)
    with pytest.raises(ToolError, match="symbolic link"):
        await runtime.manage(
            SkillManageArgs(action="create", name="storage", description="x", body="b"), ctx
        )
    with pytest.raises(ToolError, match="no skill named 'storage'"):
        await runtime.manage(SkillManageArgs(action="delete", name="storage"), ctx)
    assert sorted(p.name for p in storage.iterdir()) == ["sessions.db"]
    assert (storage / "sessions.db").read_text() == "every chat"


async def test_delete_removes_only_a_real_folder_with_a_regular_skill_file(
    tmp_path: Path,
) -> None:
    lay = layout(tmp_path)
    root = lay.skill_dir(SkillSource.PROJECT)
    write_skill(root, "keep", "kept")
    runtime = SkillRuntime(lay.roots(), IndexLimits())
    skill = await runtime.find("keep")
    outside = tmp_path / "victim"
    write_skill(outside, "keep", "not a skill folder of ours")
    # the folder is swapped for a link after the scan
    (root / "keep" / "SKILL.md").unlink()
    (root / "keep").rmdir()
    (root / "keep").symlink_to(outside / "keep")
    # delete_skill itself, as if the swap came between the scan and the delete
    with pytest.raises(ToolError, match="symbolic link"):
        delete_skill(skill)
    assert (outside / "keep" / "SKILL.md").is_file()
    # a real folder whose SKILL.md is not a regular file is not removed either
    (root / "keep").unlink()
    (root / "keep").mkdir()
    os.mkfifo(root / "keep" / "SKILL.md")
    with pytest.raises(ToolError, match="not a regular file"):
        delete_skill(skill)
    assert (root / "keep").is_dir()


async def test_a_slow_scan_does_not_hold_up_turns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lay = layout(tmp_path)
    write_skill(lay.skill_dir(SkillSource.USER), "alpha", "a")
    runtime = SkillRuntime(lay.roots(), IndexLimits(), scan_timeout_secs=0.2)
    first = await runtime.current()
    assert "alpha" in first.skills
    release = threading.Event()
    calls: list[int] = []

    def stuck(roots: SkillRoots) -> Scan:  # a file system that does not answer
        calls.append(1)
        release.wait(30)
        return scan(roots)

    monkeypatch.setattr(runtime_module, "fingerprint", stuck)
    try:
        with capture_logs() as logs:
            async with asyncio.timeout(5):
                assert await runtime.current() is first  # the last good scan
                for _ in range(5):  # no second thread while the first is stuck
                    assert await runtime.current() is first
        assert len(calls) == 1
        assert [e["event"] for e in logs].count("skills_scan_slow") == 1
    finally:
        release.set()


async def test_a_start_whose_first_scan_is_slow_has_no_skills_yet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lay = layout(tmp_path)
    release = threading.Event()

    def stuck(roots: SkillRoots) -> Scan:
        release.wait(30)
        return scan(roots)

    monkeypatch.setattr(runtime_module, "scan", stuck)
    runtime = SkillRuntime(lay.roots(), IndexLimits(), scan_timeout_secs=0.2)
    try:
        async with asyncio.timeout(5):
            assert (await runtime.current()).skills == {}
            assert await runtime.index_text() is None
    finally:
        release.set()
