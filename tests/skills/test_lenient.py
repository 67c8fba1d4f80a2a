"""SKILL.md files the reference clients load although they break a rule: a
description over 1,024 characters, an unquoted `: ` in a YAML value. They
load here too, each with one warning (not one per rescan)."""

from __future__ import annotations

import shutil
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

from structlog.testing import capture_logs

from skills.discovery import scan
from skills.index import IndexLimits
from skills.model import SkillSource
from skills.parse import MAX_DESCRIPTION_CHARS, parse_skill
from skills.runtime import SkillRuntime
from tests.skills.helpers import BOMB, layout, write_skill

FIXTURES = Path(__file__).parent / "fixtures"


def _install(tmp_path: Path, *names: str) -> Path:
    lay = layout(tmp_path)
    root = lay.skill_dir(SkillSource.PROJECT)
    for name in names:
        shutil.copytree(FIXTURES / name, root / name)
    return root


async def _load_twice(
    tmp_path: Path, *names: str
) -> tuple[dict[str, str], list[MutableMapping[str, Any]]]:
    root = _install(tmp_path, *names)
    runtime = SkillRuntime(layout(tmp_path).roots(), IndexLimits(), check_interval_secs=0)
    with capture_logs() as logs:
        first = {s.name: s.description for s in await runtime.skills()}
        write_skill(root, "unrelated", "another skill")  # the disk changed: a real rescan
        second = {s.name: s.description for s in await runtime.skills()}
        await runtime.reload()
    assert runtime.scans >= 2
    assert "unrelated" in second
    assert {k: v for k, v in second.items() if k != "unrelated"} == first
    return first, [e for e in logs if e["log_level"] == "warning"]


async def test_a_1068_character_description_loads_cut_with_one_warning(tmp_path: Path) -> None:
    raw = (FIXTURES / "long-description" / "SKILL.md").read_text()
    full = raw.split("description: ", 1)[1].split("\n", 1)[0]
    assert len(full) == 1068
    skills, warnings = await _load_twice(tmp_path, "long-description")
    description = skills["long-description"]
    assert len(description) <= MAX_DESCRIPTION_CHARS
    assert description.endswith("…")
    assert full.startswith(description[:-1])
    assert full[len(description) - 1] == " "  # cut between words
    assert [w["event"] for w in warnings] == ["skill_loaded_leniently"]
    assert "1068 characters" in str(warnings[0]["reason"])
    assert str(warnings[0]["path"]).endswith("long-description/SKILL.md")


async def test_an_unquoted_colon_in_a_value_loads_with_one_warning(tmp_path: Path) -> None:
    skills, warnings = await _load_twice(tmp_path, "colon-in-value")
    assert skills["colon-in-value"] == "Use this when: the user asks for a release checklist"
    assert [w["event"] for w in warnings] == ["skill_loaded_leniently"]
    assert "not valid YAML" in str(warnings[0]["reason"])
    assert str(warnings[0]["path"]).endswith("colon-in-value/SKILL.md")


def test_the_lenient_reading_keeps_the_other_fields_and_the_body(tmp_path: Path) -> None:
    _install(tmp_path, "colon-in-value")
    skill = scan(layout(tmp_path).roots()).skills["colon-in-value"]
    assert skill.metadata["license"] == "MIT"
    assert skill.metadata["metadata"] == {"author": "someone"}
    assert skill.body == "List the release steps."


def test_a_colon_in_a_folded_value_and_a_trailing_comment(tmp_path: Path) -> None:
    text = (
        "---\ndescription: Use when: the user asks\n  about releases  # why\n"
        "tags: [a, b]\n---\nBody\n"
    )
    skill = parse_skill(text, tmp_path / "folded", SkillSource.USER)
    assert skill.description == "Use when: the user asks about releases"
    assert skill.metadata["tags"] == ["a", "b"]
    assert skill.warning is not None


def test_other_yaml_errors_and_limits_are_not_forgiven(tmp_path: Path) -> None:
    lay = layout(tmp_path)
    root = lay.skill_dir(SkillSource.USER)
    write_skill(root, "unclosed", "[unclosed")
    write_skill(root, "colon-and-unclosed", "Use when: asked", extra="tags: [a\n")
    bomb = root / "bomb" / "SKILL.md"
    bomb.parent.mkdir()
    bomb.write_text(BOMB.replace("description: boom", "description: Use when: boom"))
    found = scan(lay.roots())
    assert not found.lenient
    reasons = {i.path.parent.name: i.reason for i in found.invalid}
    assert set(reasons) == {"unclosed", "colon-and-unclosed", "bomb"}
    assert "alias" in reasons["bomb"]


def test_a_description_within_the_limit_is_left_whole_and_loads_silently(tmp_path: Path) -> None:
    fits = " ".join(["word"] * 200)  # 999 characters
    skill = parse_skill(f"---\ndescription: {fits}\n---\n", tmp_path / "fits", SkillSource.USER)
    assert skill.description == fits
    assert skill.warning is None


def test_one_long_word_is_cut_inside_it(tmp_path: Path) -> None:
    text = f"---\ndescription: {'y' * 2000}\n---\n"
    skill = parse_skill(text, tmp_path / "word", SkillSource.USER)
    assert len(skill.description) == MAX_DESCRIPTION_CHARS
