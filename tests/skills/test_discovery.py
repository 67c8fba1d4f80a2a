from __future__ import annotations

from pathlib import Path

from structlog.testing import capture_logs

from skills.discovery import fingerprint, scan
from skills.index import IndexLimits
from skills.model import SkillSource
from skills.runtime import SkillRuntime
from tests.skills.helpers import SIX, layout, write_skill


def test_a_later_source_overrides_a_same_named_skill(tmp_path: Path) -> None:
    lay = layout(tmp_path)
    for source in SIX:
        write_skill(lay.skill_dir(source), "demo", f"demo from {source.value}", f"body {source}")
    write_skill(lay.skill_dir(SkillSource.USER), "other", "only in user")
    found = scan(lay.roots())
    assert found.skills["demo"].source is SkillSource.PROJECT_OPENCLAW
    assert found.skills["demo"].description == "demo from project_openclaw"
    assert found.skills["other"].source is SkillSource.USER
    # built-in skills are there too, below everything
    assert found.skills["skill-creator"].source is SkillSource.BUILTIN


def test_only_the_configured_sources_are_read(tmp_path: Path) -> None:
    lay = layout(tmp_path)
    for source in SIX:
        write_skill(lay.skill_dir(source), "demo", f"demo from {source.value}")
    found = scan(lay.roots([SkillSource.USER, SkillSource.PROJECT_AGENT]))
    assert found.skills["demo"].source is SkillSource.PROJECT_AGENT


def test_a_project_skill_overrides_a_builtin_one(tmp_path: Path) -> None:
    lay = layout(tmp_path)
    write_skill(lay.skill_dir(SkillSource.PROJECT), "reminders", "my own reminders")
    assert scan(lay.roots()).skills["reminders"].source is SkillSource.PROJECT


def test_name_defaults_to_the_folder_and_unknown_fields_are_kept(tmp_path: Path) -> None:
    lay = layout(tmp_path)
    root = lay.skill_dir(SkillSource.USER)
    write_skill(root, "pdf-tools", "Work with PDFs", extra="license: MIT\ntags: [a, b]\n")
    write_skill(root, "folder-x", "Named in the file", name="custom-name")
    found = scan(lay.roots())
    assert found.skills["pdf-tools"].metadata["tags"] == ["a", "b"]
    assert found.skills["pdf-tools"].metadata["license"] == "MIT"
    assert found.skills["custom-name"].folder.name == "folder-x"
    assert "folder-x" not in found.skills


async def test_a_skill_without_description_is_skipped_with_one_warning(tmp_path: Path) -> None:
    lay = layout(tmp_path)
    bad = write_skill(lay.skill_dir(SkillSource.PROJECT), "broken", None)
    write_skill(lay.skill_dir(SkillSource.PROJECT), "good", "fine")
    runtime = SkillRuntime(lay.roots(), IndexLimits())
    with capture_logs() as logs:
        names = [s.name for s in await runtime.skills()]
        await runtime.reload()  # the same broken file: no second warning
    assert "good" in names
    assert "broken" not in names
    warnings = [e for e in logs if e["event"] == "skill_invalid"]
    assert len(warnings) == 1
    assert warnings[0]["path"] == str(bad)
    assert "description" in warnings[0]["reason"]


def test_broken_yaml_and_missing_front_matter_are_invalid(tmp_path: Path) -> None:
    lay = layout(tmp_path)
    root = lay.skill_dir(SkillSource.USER)
    (root / "no-front").mkdir(parents=True)
    (root / "no-front" / "SKILL.md").write_text("just text\n")
    (root / "bad-yaml").mkdir()
    (root / "bad-yaml" / "SKILL.md").write_text("---\ndescription: [unclosed\n---\nx\n")
    found = scan(lay.roots())
    assert {i.path.parent.name for i in found.invalid} == {"no-front", "bad-yaml"}


def test_the_fingerprint_changes_with_the_disk_only(tmp_path: Path) -> None:
    lay = layout(tmp_path)
    root = lay.skill_dir(SkillSource.USER)
    path = write_skill(root, "a", "first")
    roots = lay.roots()
    before = fingerprint(roots)
    assert fingerprint(roots) == before
    write_skill(root, "b", "second")
    added = fingerprint(roots)
    assert added != before
    path.write_text("---\ndescription: first, longer now\n---\nbody\n")
    assert fingerprint(roots) != added


async def test_the_runtime_rescans_only_when_something_changed(tmp_path: Path) -> None:
    lay = layout(tmp_path)
    root = lay.skill_dir(SkillSource.USER)
    write_skill(root, "a", "first")
    runtime = SkillRuntime(lay.roots(), IndexLimits())
    await runtime.index_text()
    await runtime.index_text()
    assert runtime.scans == 1
    write_skill(root, "b", "second")
    text = await runtime.index_text()
    assert runtime.scans == 2
    assert text is not None
    assert "- b: second" in text
