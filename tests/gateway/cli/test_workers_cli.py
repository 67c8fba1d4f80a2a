"""`picobot workers`: the workers sharing a PostgreSQL database and their leases,
as the database has them (docs/scale-out.md); on SQLite it says there are none."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.cli.program import main
from storage.backends import open_database
from storage.store import Store
from tests.support import logging_restored


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    with logging_restored():
        yield


def _config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str) -> Path:
    monkeypatch.setenv("PICOBOT_HOME", str(tmp_path))
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"storage": {"url": url}}))
    return path


async def _two_workers(url: str) -> None:
    async with open_database(url) as db:
        store = Store(db)
        for name in ("w1", "w2"):
            await store.cluster.register(
                f"{name}/1-aaaa", name=name, host="h", pid=1, address=f"10.0.0.1:{name[-1]}",
                lease_secs=30,
            )  # fmt: skip
        await store.cluster.acquire("w1/1-aaaa", ["channel:telegram", "chat:telegram:1"])
        await store.cluster.acquire("w2/1-aaaa", ["chat:telegram:2", "chat:websocket:3"])
        await db.write(
            lambda c: (
                c.execute(
                    "UPDATE workers SET expires_at = 0, heartbeat_at = 0 WHERE id = 'w2/1-aaaa'"
                ).rowcount
            )
        )


@pytest.mark.postgres
def test_workers_lists_each_worker_alive_or_dead_with_its_leases(
    postgres_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    asyncio.run(_two_workers(postgres_url))
    config = _config(tmp_path, monkeypatch, postgres_url)
    capsys.readouterr()  # the migrations' log lines
    assert main(["workers", "--config", str(config), "--json"]) == 0
    report = {w["name"]: w for w in json.loads(capsys.readouterr().out)["workers"]}
    assert report["w1"]["alive"] is True
    assert report["w1"]["channels"] == ["telegram"]
    assert report["w1"]["chats"] == 1
    assert report["w1"]["address"] == "10.0.0.1:1"
    assert report["w2"]["alive"] is False  # silent past its lease: its leases go to others
    assert report["w2"]["chats"] == 2
    assert report["w2"]["heartbeat_age_secs"] > 1000
    assert main(["workers", "--config", str(config)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(
        line.startswith("w1\t") and "alive" in line and "channels=telegram" in line
        for line in lines
    )
    assert any(line.startswith("w2\t") and "DEAD" in line and "chats=2" in line for line in lines)


def test_workers_on_sqlite_says_there_are_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path, monkeypatch, f"sqlite:///{tmp_path / 'db.sqlite'}")
    assert main(["workers", "--config", str(config)]) == 1
    assert "one gateway, no workers" in capsys.readouterr().out
