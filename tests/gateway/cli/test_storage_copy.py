"""`picobot storage copy`, and `picobot backup`/`restore` with storage.url on PostgreSQL."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from gateway.cli.program import main
from storage.backends import open_database
from storage.database import Connection
from storage.sql.conversations import messages, sessions

pytestmark = pytest.mark.postgres

SECRET = "s3cret-pw"


def with_password(url: str) -> str:
    """The test cluster trusts loopback, so any password is accepted: enough to
    see that it is never printed."""
    return url.replace("postgresql://postgres@", f"postgresql://postgres:{SECRET}@", 1)


def _fill(c: Connection) -> None:
    sessions.create_session(c, "telegram", "42", "telegram:42")
    messages.append_messages(c, "telegram:42", [])


async def _seed(url: str) -> None:
    db = open_database(url)
    await db.open()
    try:
        await db.write(_fill)
    finally:
        await db.close()


def _config(tmp_path: Path, storage: dict[str, str]) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"storage": storage}))
    return path


def test_copy_prints_the_counts_and_refuses_a_second_time(
    tmp_path: Path,
    postgres_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("PICOBOT_HOME", str(tmp_path))
    db_file = tmp_path / "home.db"
    asyncio.run(_seed(f"sqlite:///{db_file}"))
    config = _config(tmp_path, {"path": str(db_file)})  # --from defaults to this
    target = with_password(postgres_url)
    capsys.readouterr()

    assert main(["storage", "copy", "--to", target, "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "  sessions: 1 rows" in out
    assert "  chat_bindings: 1 rows" in out
    assert f"copied 2 rows from {db_file} to postgresql://postgres:***@" in out
    assert SECRET not in out

    assert main(["storage", "copy", "--from", str(db_file), "--to", target]) == 1
    captured = capsys.readouterr()
    [line] = [ln for ln in captured.out.splitlines() if "refused" in ln]
    assert line.startswith("copy refused: the target postgresql://postgres:***@")
    assert "is not empty (table" in line
    assert SECRET not in captured.out + captured.err


def test_copy_of_an_unknown_scheme_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db_file = tmp_path / "home.db"
    asyncio.run(_seed(f"sqlite:///{db_file}"))
    capsys.readouterr()
    code = main(["storage", "copy", "--from", str(db_file), "--to", f"mysql://u:{SECRET}@h/db"])
    assert code == 1
    out = capsys.readouterr().out
    assert out.startswith("copy refused: ")
    assert SECRET not in out


def test_backup_and_restore_follow_storage_url_to_postgresql(
    tmp_path: Path,
    postgres_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("PICOBOT_HOME", str(tmp_path))
    asyncio.run(_seed(postgres_url))
    config = _config(tmp_path, {"url": with_password(postgres_url)})
    backup = tmp_path / "backup.db"

    assert main(["backup", str(backup), "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert f"backup written: {backup}" in out
    assert "  sessions: 1 rows" in out

    assert main(["restore", str(backup), "--config", str(config)]) == 1
    out = capsys.readouterr().out
    assert "restore refused:" in out
    assert "--force" in out
    assert SECRET not in out

    assert main(["restore", str(backup), "--force", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "restored" in out
    assert SECRET not in out
