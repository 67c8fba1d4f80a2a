"""build_catalog: which SUBAGENT.md types a gateway can run (gateway/tools/subagents.py)."""

from __future__ import annotations

from pathlib import Path

from gateway.tools.subagents import build_catalog
from tests.support import make_config

TOOLS = ["read", "bash", "calculator"]


def write(root: Path, name: str, extra: str = "") -> None:
    (root / name).mkdir(parents=True)
    text = f"---\ndescription: {name} type\nprompt_template: go\n{extra}---\n"
    (root / name / "SUBAGENT.md").write_text(text, encoding="utf-8")


async def test_types_naming_unknown_tools_or_agents_are_skipped(home: Path) -> None:
    root = home / "subagents"
    write(root, "fine", "allowed_tools: [read, mcp_fs_read_file]\n")
    write(root, "typo", "allowed_tools: [raed]\n")
    write(root, "elsewhere", "agent: nobody\n")
    catalog = await build_catalog(make_config(home, "http://127.0.0.1:9"), TOOLS)
    assert sorted(catalog.types) == ["explore", "fine", "general"]


async def test_sources_choose_the_folders_read(home: Path) -> None:
    write(home / "subagents", "mine")
    write(home / "workspace" / ".picobot" / "subagents", "theirs")
    only_project = make_config(home, "http://127.0.0.1:9", subagents={"sources": ["project"]})
    catalog = await build_catalog(only_project, TOOLS)
    assert "theirs" in catalog.types
    assert "mine" not in catalog.types
