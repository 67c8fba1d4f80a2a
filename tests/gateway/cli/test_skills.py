from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from gateway.cli import main
from gateway.config.core import ConfigError
from gateway.config.loading import load_config
from storage.sql.skill_events import SkillEventRow
from storage.sqlite.db import Database
from storage.store import Store
from tests.skills.helpers import write_skill


@pytest.fixture
def config_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PICOBOT_HOME", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path / "user-home"))
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"skills": {"project_dir": str(tmp_path / "proj")}}))
    return path


async def _seed(db_path: Path) -> None:
    async with Database(db_path) as db:
        await Store(db).record_skill_events(
            [SkillEventRow("activated", "demo", "user", "/x/SKILL.md", "s1", "websocket", "c1")]
        )


def test_list_show_events(
    config_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_skill(tmp_path / "skills", "demo", "user demo", "User body.")
    write_skill(tmp_path / "proj" / ".openclaw" / "skills", "demo", "project demo", "Proj body.")
    write_skill(tmp_path / "skills", "broken", None)
    config = ["--config", str(config_path)]
    assert main(["skills", "list", *config]) == 0
    out = capsys.readouterr().out
    assert "project_openclaw" in out
    assert "project demo" in out
    assert "user demo" not in out
    assert f"skipped: {tmp_path / 'skills' / 'broken' / 'SKILL.md'}: " in out
    assert "skill-creator" in out
    assert main(["skills", "show", "demo", *config]) == 0
    assert "Proj body." in capsys.readouterr().out
    assert main(["skills", "show", "nope", *config]) == 1
    env = {"PICOBOT_HOME": str(tmp_path)}
    asyncio.run(_seed(load_config(config_path, environ=env).storage_path))
    assert main(["skills", "events", *config]) == 0
    assert "activated  demo (user) websocket:c1" in capsys.readouterr().out


def test_list_shows_skipped_files_and_lenient_loads_with_why(
    config_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fixtures = Path(__file__).parents[2] / "skills" / "fixtures"
    for name in ("long-description", "colon-in-value"):
        shutil.copytree(fixtures / name, tmp_path / "skills" / name)
    write_skill(tmp_path / "skills", "broken", None)
    write_skill(tmp_path / "skills", "unclosed", "[unclosed")
    assert main(["skills", "list", "--config", str(config_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    loaded = {line.split()[0] for line in lines if " user " in line}
    assert {"long-description", "colon-in-value"} <= loaded
    skipped = {
        line.split(": ", 2)[1]: line.split(": ", 2)[2]
        for line in lines
        if line.startswith("skipped: ")
    }
    root = tmp_path / "skills"
    assert skipped[str(root / "broken" / "SKILL.md")] == "front matter has no 'description'"
    assert "not valid YAML" in skipped[str(root / "unclosed" / "SKILL.md")]
    warned = [line for line in lines if line.startswith("warning: ")]
    assert len(warned) == 2
    assert any("long-description" in w and "cut to 1024" in w for w in warned)
    assert any("colon-in-value" in w and "read leniently" in w for w in warned)


def test_an_unknown_source_stops_start_up_naming_its_path(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"skills": {"sources": ["user", "plugins"]}}))
    with pytest.raises(ConfigError) as err:
        load_config(path, environ={}, cwd=tmp_path)
    assert "skills.sources.1" in str(err.value)
