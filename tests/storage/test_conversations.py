"""Session statistics are counted by SQLite, the same way the compactor estimates."""

from __future__ import annotations

from pathlib import Path

from agent.messages import ChatMessage, Role, ToolCall
from storage import conversations, messages, sessions
from storage.db import Connection, Database


async def test_session_stats_count_what_the_history_holds(tmp_path: Path) -> None:
    call = ToolCall("t1", "read", '{"path": "a.txt"}')
    history = [
        ChatMessage.user("hello"),
        ChatMessage(Role.ASSISTANT, "", tool_calls=(call,), reasoning_content="think"),
        ChatMessage.tool_result(call, "file text"),
        ChatMessage(Role.ASSISTANT, "done"),
    ]

    def fill(c: Connection) -> None:
        sessions.create_session(c, "websocket", "c", "c")
        messages.append_messages(c, "c", history)

    async with Database(tmp_path / "db.sqlite") as db:
        assert await db.read(lambda c: conversations.session_stats(c, "websocket", "c")) is None
        await db.write(fill)
        stats = await db.read(lambda c: conversations.session_stats(c, "websocket", "c"))
    assert stats is not None
    assert stats.message_count == 4
    expected = sum(len(m.content) + len(m.reasoning_content or "") for m in history)
    expected += sum(len(t.arguments) for m in history for t in m.tool_calls)
    assert stats.chars == expected
    assert stats.record.user_turns == 1
