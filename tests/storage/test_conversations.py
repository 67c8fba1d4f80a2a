"""Session statistics are counted by SQLite, the same way the compactor estimates."""

from __future__ import annotations

from agent.messages import ChatMessage, Marker, Role, ToolCall, Usage
from storage.database import Connection
from storage.sql.conversations import commands as conversations
from storage.sql.conversations import messages, sessions
from storage.sql.conversations.compaction import commit_compaction
from tests.storage.conftest import OpenStorage


async def test_session_stats_count_what_the_history_holds(open_storage: OpenStorage) -> None:
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

    async with open_storage() as db:
        assert await db.read(lambda c: conversations.session_stats(c, "websocket", "c")) is None
        await db.write(fill)
        stats = await db.read(lambda c: conversations.session_stats(c, "websocket", "c"))
    assert stats is not None
    assert stats.message_count == 4
    expected = sum(len(m.content) + len(m.reasoning_content or "") for m in history)
    expected += sum(len(t.arguments) for m in history for t in m.tool_calls)
    assert stats.chars == expected
    assert stats.record.user_turns == 1


async def test_session_tokens_count_every_segment_once(open_storage: OpenStorage) -> None:
    """Tokens of the whole session: a compaction's copies of kept messages
    are not counted again, its summary call is, older rows without cache
    counts read as zero."""
    turns = [
        ChatMessage.user("one"),
        ChatMessage(Role.ASSISTANT, "a", usage=Usage(1000, 10, 800, 150)),
        ChatMessage.user("two"),
        ChatMessage(Role.ASSISTANT, "b", usage=Usage(1100, 20, 950, 100)),
    ]
    summary = ChatMessage.system("[Compressed History] one", Marker.HISTORY_COMPACTION)
    summary.usage = Usage(500, 40)
    legacy = '{"input_tokens": 7, "output_tokens": 3}'  # stored before cache counts existed

    def fill(c: Connection) -> None:
        sessions.create_session(c, "websocket", "c", "c")
        messages.append_messages(c, "c", turns)
        commit_compaction(c, "c", 0, [summary, *turns[2:]], "2026-01-01T00:00:00+00:00")
        messages.append_messages(c, "c", [ChatMessage.user("three")])
        c.execute("UPDATE messages SET usage = ? WHERE content = 'three'", (legacy,))

    async with open_storage() as db:
        await db.write(fill)
        stats = await db.read(lambda c: conversations.session_stats(c, "websocket", "c"))
    assert stats is not None
    assert stats.record.segment == 1
    assert stats.tokens == Usage(1000 + 1100 + 500 + 7, 10 + 20 + 40 + 3, 1750, 250)
    assert stats.tokens.uncached_input_tokens == 2607 - 1750 - 250


async def test_recent_sessions_are_newest_first_across_chats(open_storage: OpenStorage) -> None:
    def fill(c: Connection) -> None:
        for chat in ("a", "b", "c"):
            sessions.create_session(c, "telegram" if chat != "c" else "feishu", chat, chat)
        messages.append_messages(c, "b", [ChatMessage.user("later"), ChatMessage.user("again")])

    async with open_storage() as db:
        await db.write(fill)
        every = await db.read(lambda c: sessions.recent_sessions(c, None, None, 10))
        telegram = await db.read(lambda c: sessions.recent_sessions(c, "telegram", None, 10))
        one = await db.read(lambda c: sessions.recent_sessions(c, "telegram", "b", 10))
        first = await db.read(lambda c: sessions.recent_sessions(c, None, None, 1))
    assert every[0].id == "b"  # written to last
    assert {s.id for s in every} == {"a", "b", "c"}
    assert (every[0].message_count, every[1].message_count) == (2, 0)
    assert {s.id for s in telegram} == {"a", "b"}
    assert [s.id for s in one] == ["b"]
    assert [s.id for s in first] == ["b"]
