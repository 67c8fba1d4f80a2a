from __future__ import annotations

from pathlib import Path

from skills.index import IndexLimits, render_index
from skills.model import Skill, SkillSource


def _skills(n: int, description: str = "does a thing " * 8) -> list[Skill]:
    return [
        Skill(f"skill-{i:02d}", description, "body", Path("/x"), SkillSource.USER) for i in range(n)
    ]


def test_forty_skills_list_at_most_32_within_4000_chars() -> None:
    text = render_index(_skills(40), IndexLimits())
    assert text is not None
    listed = [line for line in text.splitlines() if line.startswith("- ")]
    assert len(listed) <= 32
    assert len(text) <= 4_000
    assert text.endswith(
        f"…and {40 - len(listed)} more (`skill_manage` with action `list` shows them all)."
    )


def test_the_character_cap_cuts_before_the_entry_cap() -> None:
    text = render_index(_skills(40, "x" * 190), IndexLimits(max_chars=1_000, max_listed=32))
    assert text is not None
    assert len(text) <= 1_000
    listed = [line for line in text.splitlines() if line.startswith("- ")]
    assert 0 < len(listed) < 32
    assert f"…and {40 - len(listed)} more" in text


def test_few_skills_are_listed_whole_and_the_text_is_stable() -> None:
    skills = _skills(3, "short")
    text = render_index(skills, IndexLimits())
    assert text is not None
    assert "more" not in text
    assert text == render_index(list(skills), IndexLimits())
    assert render_index([], IndexLimits()) is None


def test_a_long_description_is_cut_on_its_line() -> None:
    text = render_index(_skills(1, "y" * 1_000), IndexLimits())
    assert text is not None
    assert len(text.splitlines()[1]) < 220
