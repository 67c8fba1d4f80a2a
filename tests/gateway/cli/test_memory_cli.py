"""`picobot memory …` on a real database file."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from gateway.cli.memory import add_memory_parser, run_memory_command
from gateway.config.core import Config
from gateway.config.loading import LoadedConfig
from storage.sql.memory.memories import Provenance, Scope
from storage.sqlite.db import Database
from storage.units.memories import MemoryStore


@pytest.fixture
async def loaded(tmp_path: Path) -> LoadedConfig:
    db_path = tmp_path / "storage" / "sessions.db"
    async with Database(db_path) as db:
        store = MemoryStore(db)
        for key, content in (("lang", "prefers Chinese"), ("city", "lives in Oslo")):
            await store.put(Scope("user", "feishu:u1"), "profile", key, content,
                            Provenance("agent"), cap=None)  # fmt: skip
    config = Config.model_validate({"storage": {"path": str(db_path)}})
    return LoadedConfig(config, None, tmp_path, {})


async def memory(loaded: LoadedConfig, *argv: str) -> int:
    parser = argparse.ArgumentParser(prog="picobot")
    add_memory_parser(parser.add_subparsers(dest="command"))
    return await run_memory_command(parser.parse_args(["memory", *argv]), loaded)


async def test_list_show_search_export_delete(
    loaded: LoadedConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await memory(loaded, "list") == 0
    assert "feishu:u1  2 entries, no summary" in capsys.readouterr().out
    assert await memory(loaded, "show", "feishu:u1") == 0
    assert "profile/city" in capsys.readouterr().out
    assert await memory(loaded, "search", "feishu:u1", "oslo") == 0
    found = capsys.readouterr().out
    assert "lives in Oslo" in found
    assert "Chinese" not in found
    assert await memory(loaded, "export") == 0
    exported = json.loads(capsys.readouterr().out)
    assert len(exported["feishu:u1"]["memories"]) == 2
    assert await memory(loaded, "delete", "feishu:u1", "profile/nope") == 1
    assert await memory(loaded, "delete", "feishu:u1", "profile/city") == 0
    assert await memory(loaded, "delete", "feishu:u1", "--all") == 0
    capsys.readouterr()
    assert await memory(loaded, "list") == 0
    assert capsys.readouterr().out == "no memories\n"
