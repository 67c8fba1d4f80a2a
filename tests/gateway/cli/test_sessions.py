"""`picobot sessions show` on a real database file: a sub-agent's transcript."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from agent.messages import ChatMessage, Marker, Role
from gateway.cli.program import main
from gateway.config.loading import load_config
from storage.sqlite.db import Database
from storage.store import Store


async def _seed(db_path: Path) -> None:
    async with Database(db_path) as db:
        store = Store(db)
        first = [ChatMessage.system("be brief", Marker.SUBAGENT_PROMPT), ChatMessage.user("look")]
        await store.transcripts.open_child("task:chat-1:c9", "chat-1", "look around", first, "r1")
        await store.append_turn(
            "task:chat-1:c9", "r1", [ChatMessage(Role.ASSISTANT, "found it")], None
        )


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A config file whose database is in tmp_path (PICOBOT_HOME too)."""
    monkeypatch.setenv("PICOBOT_HOME", str(tmp_path))
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"storage": {"path": str(tmp_path / "db.sqlite")}}))
    return path


def test_show_prints_a_child_transcript(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = config
    asyncio.run(_seed(load_config(path, environ={}).storage_path))
    assert main(["sessions", "show", "task:chat-1:c9", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert "session task:chat-1:c9  (subagent:chat-1, active)" in out
    assert "title: look around" in out
    assert "[1] system (subagent_prompt): be brief" in out
    assert "[3] assistant: found it" in out
    assert main(["sessions", "show", "nope", "--config", str(path)]) == 1
    assert "no session 'nope'" in capsys.readouterr().out


async def _seed_chats(db_path: Path) -> None:
    async with Database(db_path) as db:
        store = Store(db)
        await store.new_session("telegram", "42", "telegram:42", "Trip to Hangzhou")
        await store.new_session("websocket", "cli-1", "websocket:cli-1", None)
        await store.append_turn("telegram:42", "r1", [ChatMessage.user("hello")], None)


def test_list_shows_the_newest_sessions_of_every_chat(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = config
    asyncio.run(_seed_chats(load_config(path, environ={}).storage_path))
    capsys.readouterr()  # the seeding's log

    assert main(["sessions", "list", "--config", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("last active")
    assert len(lines) == 3
    assert lines[1].endswith("telegram:42  (telegram:42)  Trip to Hangzhou")  # written last
    assert " active " in lines[1]
    assert lines[2].endswith("websocket:cli-1  (websocket:cli-1)")

    assert (
        main(["sessions", "list", "--channel", "websocket", "--json", "--config", str(path)]) == 0
    )
    [row] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert (row["id"], row["title"], row["message_count"]) == ("websocket:cli-1", None, 0)

    assert main(["sessions", "list", "--chat", "nobody", "--config", str(path)]) == 0
    assert capsys.readouterr().out == "no sessions\n"
