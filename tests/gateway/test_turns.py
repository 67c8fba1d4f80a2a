"""TurnOpener: when a turn may open from the cached history."""

from __future__ import annotations

from pathlib import Path

from agent.messages import ChatMessage, Role
from gateway.turns.opener import OpenedTurn, TurnOpener
from storage.sql.conversations.turns import Opening
from storage.sqlite.db import Database
from storage.store import Store


async def _turn(opener: TurnOpener, db: Database, text: str, inbox_id: int) -> OpenedTurn:
    turn = await opener.open(
        Opening("websocket", "c", "c", None, False, (ChatMessage.user(text),), (inbox_id,), "r")
    )
    reply = ChatMessage(Role.ASSISTANT, f"echo: {text}")
    turn.history.append(reply)
    await Store(db).append_turn(turn.session_id, "r", [reply], turn.deferred)
    turn.deferred = None
    opener.remember("websocket", "c", turn)
    return turn


async def test_only_a_recent_turn_lets_the_next_one_open_in_memory(tmp_path: Path) -> None:
    async with Database(tmp_path / "t.db") as db:
        opener = TurnOpener(Store(db), None, 0, in_memory_for_secs=3600)
        await _turn(opener, db, "one", 1)
        second = await _turn(opener, db, "two", 2)
        assert opener.opened_in_memory == 1
        assert [m.content for m in second.history] == ["one", "echo: one", "two", "echo: two"]

        opener.in_memory_for_secs = 0.0  # as if the chat had been idle too long
        third = await _turn(opener, db, "three", 3)
        assert opener.opened_in_memory == 1  # read from storage instead
        assert [m.seq for m in third.history] == [1, 2, 3, 4, 5, 6]

        opener.in_memory_for_secs = 3600
        opener.forget("websocket", "c")  # e.g. after /new
        await _turn(opener, db, "four", 4)
        assert opener.opened_in_memory == 1
