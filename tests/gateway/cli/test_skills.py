from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from gateway.cli import main
from gateway.config.core import ConfigError, load_config
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
    assert f"invalid: {tmp_path / 'skills' / 'broken' / 'SKILL.md'}" in out
    assert "skill-creator" in out
    assert main(["skills", "show", "demo", *config]) == 0
    assert "Proj body." in capsys.readouterr().out
    assert main(["skills", "show", "nope", *config]) == 1
    env = {"PICOBOT_HOME": str(tmp_path)}
    asyncio.run(_seed(load_config(config_path, environ=env).storage_path))
    assert main(["skills", "events", *config]) == 0
    assert "activated  demo (user) websocket:c1" in capsys.readouterr().out


def test_an_unknown_source_stops_start_up_naming_its_path(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"skills": {"sources": ["user", "plugins"]}}))
    with pytest.raises(ConfigError) as err:
        load_config(path, environ={}, cwd=tmp_path)
    assert "skills.sources.1" in str(err.value)
