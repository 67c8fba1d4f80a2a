"""`picobot pairing list|approve|revoke` on a real database file."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gateway.access.pairing import CODE_RULES
from gateway.cli.program import main
from gateway.config.loading import load_config
from storage.sqlite.db import Database
from storage.store import Store


async def _seed(db_path: Path, *, at: datetime) -> None:
    async with Database(db_path) as db:
        store = Store(db)
        for sender, code in (("42", "ABCD-EFGH"), ("43", "HJKM-NPQR")):
            await store.issue_pairing_code(
                "telegram", sender, sender, lambda c=code: c, at, CODE_RULES
            )


@pytest.fixture
def config_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PICOBOT_HOME", str(tmp_path))
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"storage": {"path": str(tmp_path / "db.sqlite")}}))
    return path


def test_list_approve_revoke(config_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db_path = load_config(config_path, environ={}).storage_path
    asyncio.run(_seed(db_path, at=datetime.now(UTC)))
    config = ["--config", str(config_path)]
    assert main(["pairing", "list", *config]) == 0
    listed = capsys.readouterr().out
    assert "telegram:42  code ABCD-EFGH, pending until" in listed
    assert "telegram:43  code HJKM-NPQR" in listed

    assert main(["pairing", "approve", "abcd efgh", *config]) == 0
    assert "Approved telegram:42 (code ABCD-EFGH)" in capsys.readouterr().out
    assert main(["pairing", "approve", "ABCD-EFGH", *config]) == 1
    assert "approved already" in capsys.readouterr().out
    assert main(["pairing", "approve", "nope", *config]) == 2
    assert "not a pairing code" in capsys.readouterr().err

    assert main(["pairing", "list", *config]) == 0
    assert "telegram:42  approved by host on" in capsys.readouterr().out

    assert main(["pairing", "revoke", "telegram:42", *config]) == 0
    assert "revoked telegram:42" in capsys.readouterr().out
    assert main(["pairing", "revoke", "telegram:42", *config]) == 1
    assert main(["pairing", "revoke", "42", *config]) == 2
    capsys.readouterr()
    assert main(["pairing", "list", *config]) == 0
    assert "telegram:42" not in capsys.readouterr().out


def test_an_expired_code_is_not_approved_on_the_host(
    config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db_path = load_config(config_path, environ={}).storage_path
    asyncio.run(_seed(db_path, at=datetime.now(UTC) - timedelta(minutes=11)))
    assert main(["pairing", "approve", "ABCD-EFGH", "--config", str(config_path)]) == 1
    assert "has expired" in capsys.readouterr().out
