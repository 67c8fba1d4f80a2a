"""TurnOpener: when a turn may open from the cached history."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from agent.messages import ChatMessage, Role
from gateway.turns import OpenedTurn, TurnOpener
from storage import messages
from storage.db import Database


async def _turn(opener: TurnOpener, db: Database, text: str, inbox_id: int) -> OpenedTurn:
    turn = await opener.open(
        channel="websocket",
        chat_id="c",
        base_id="c",
        resume_session=None,
        fresh=False,
        new=[ChatMessage.user(text)],
        inbox_ids=[inbox_id],
        run_id=f"r{inbox_id}",
    )
    reply = ChatMessage(Role.ASSISTANT, f"echo: {text}")
    turn.history.append(reply)
    deferred = turn.deferred

    def finish(c: sqlite3.Connection) -> None:
        if deferred is not None:
            deferred.store(c, [reply], finishing=True)
        else:
            messages.append_messages(c, turn.session_id, [reply])

    await db.write(finish)
    turn.deferred = None
    opener.remember("websocket", "c", turn)
    return turn


async def test_only_a_recent_turn_lets_the_next_one_open_in_memory(tmp_path: Path) -> None:
    async with Database(tmp_path / "t.db") as db:
        opener = TurnOpener(db, None, 0, in_memory_for_secs=3600)
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
