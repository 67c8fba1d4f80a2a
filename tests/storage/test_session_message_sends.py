"""The sends a session made, read back from its stored tool results
(storage/session_messages.py `sent_between`): what send_session_message's rate
window must not forget across a restart."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path

from agent.messages import ChatMessage, Marker, Role, ToolCall
from storage.db import Database
from storage.store import Store

SESSION = "task:p:c"
TOOL = "send_session_message"


def result(call: ToolCall, content: str, at: datetime) -> ChatMessage:
    return dataclasses.replace(ChatMessage.tool_result(call, content), created_at=at)


async def test_only_the_sessions_sends_that_happened_in_the_range_count(tmp_path: Path) -> None:
    now = datetime.now(UTC)
    calls = [ToolCall(f"c{n}", TOOL, "{}") for n in range(4)] + [ToolCall("r", "read", "{}")]
    async with Database(tmp_path / "db.sqlite") as db:
        store = Store(db)
        first = [ChatMessage.system("t", Marker.SUBAGENT_PROMPT), ChatMessage.user("d")]
        await store.transcripts.open_child(SESSION, "p", "d", first, "r1")
        await store.transcripts.open_child("task:p:other", "p", "d", first, "r1")
        batch = [
            ChatMessage(Role.ASSISTANT, tool_calls=tuple(calls)),
            result(calls[0], "Sent to telegram:1.", now - timedelta(seconds=10)),
            result(calls[1], "Error: rate limit: …", now - timedelta(seconds=9)),  # not sent
            result(calls[2], "Sent to telegram:2.", now - timedelta(seconds=100)),  # too old
            result(calls[3], "Sent to telegram:3.", now + timedelta(seconds=1)),  # too new
            result(calls[4], "Sent to me, says a file", now - timedelta(seconds=8)),  # not the tool
        ]
        await store.append_turn(SESSION, "r1", batch, None)
        since, until = now - timedelta(seconds=60), now
        found = await store.transcripts.sent_between(SESSION, TOOL, "Sent to ", since, until)
        other = await store.transcripts.sent_between("task:p:other", TOOL, "Sent to ", since, until)
    assert found == [now - timedelta(seconds=10)]
    assert other == []
