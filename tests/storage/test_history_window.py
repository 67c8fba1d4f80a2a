"""load_window: a long segment is read only as far back as the budget reaches."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent.messages import ChatMessage, HistorySize, Marker, Role, ToolCall, message_chars
from storage.database import Database
from storage.sql.conversations import messages, sessions
from storage.sql.conversations.history_window import LATEST_MARKED, load_window
from storage.sqlite.db import SqliteDatabase
from tests.storage.conftest import OpenStorage

SESSION = "chat-1"


@pytest.fixture
async def db(open_storage: OpenStorage) -> AsyncIterator[Database]:
    async with open_storage() as database:
        await database.write(lambda c: sessions.create_session(c, "websocket", SESSION, SESSION))
        yield database


@pytest.fixture
async def sqlite_db(tmp_path: Path) -> AsyncIterator[SqliteDatabase]:
    """For what only SQLite can show (its trace callback)."""
    async with SqliteDatabase(tmp_path / "sessions.db") as database:
        await database.write(lambda c: sessions.create_session(c, "websocket", SESSION, SESSION))
        yield database


def _turn(n: int) -> list[ChatMessage]:
    call = ToolCall(f"call_{n}", "read", "{}")
    return [
        ChatMessage.user(f"question {n} " + "q" * 80),
        ChatMessage(Role.ASSISTANT, "", tool_calls=(call,)),
        ChatMessage.tool_result(call, f"result {n} " + "r" * 80),
        ChatMessage(Role.ASSISTANT, f"answer {n}"),
    ]


def _history(turns: int) -> list[ChatMessage]:
    out = [ChatMessage.system("persona", marker=Marker.AGENT_PROMPT)]
    out.append(ChatMessage.system("[Compressed History] before", Marker.HISTORY_COMPACTION))
    for n in range(turns):
        out.extend(_turn(n))
    return out


def _store(conn: sqlite3.Connection, history: list[ChatMessage]) -> None:
    messages.append_messages(conn, SESSION, history)


async def test_within_the_budget_the_whole_segment_is_read(db: Database) -> None:
    history = _history(5)
    await db.write(lambda c: _store(c, history))
    loaded, size = await db.read(lambda c: load_window(c, SESSION, 0, 1_000_000))
    assert [m.content for m in loaded] == [m.content for m in history]
    assert size == HistorySize.of(history)


async def test_a_long_segment_is_read_from_the_newest_turns_that_fit(db: Database) -> None:
    history = _history(500)
    await db.write(lambda c: _store(c, history))
    loaded, size = await db.read(lambda c: load_window(c, SESSION, 0, 2_000))
    # only a tail is read; the size says it is over the budget, and covers what was read
    assert 2 < len(loaded) < 100
    assert size.chars > 2_000
    assert size.chars >= sum(message_chars(m) for m in loaded)
    assert size.user_turns >= sum(1 for m in loaded if m.role is Role.USER)
    # the latest agent prompt and summary stay in front, then whole turns
    assert [m.marker for m in loaded[:2]] == [Marker.AGENT_PROMPT, Marker.HISTORY_COMPACTION]
    assert loaded[2].role is Role.USER
    assert loaded[-1].content == "answer 499"
    tail_chars = sum(message_chars(m) for m in loaded[2:])
    assert tail_chars <= 2_000
    # every tool result has its call
    called = {c.id for m in loaded for c in m.tool_calls}
    assert all(m.tool_call_id in called for m in loaded if m.role is Role.TOOL)
    assert [m.seq for m in loaded[2:]] == sorted(m.seq for m in loaded[2:] if m.seq is not None)


async def test_a_last_turn_larger_than_the_budget_is_still_read(db: Database) -> None:
    history = [*_history(3), ChatMessage.user("z" * 5_000)]
    await db.write(lambda c: _store(c, history))
    loaded, _ = await db.read(lambda c: load_window(c, SESSION, 0, 1_000))
    assert loaded[-1].content == "z" * 5_000
    assert [m.role for m in loaded[2:]] == [Role.USER]


async def test_failed_turns_are_not_counted(db: Database) -> None:
    history = _history(2)
    await db.write(lambda c: _store(c, history))
    _, before = await db.read(lambda c: load_window(c, SESSION, 0, 1_000_000))
    failed = [ChatMessage.user("u" * 1_000)]
    await db.write(lambda c: messages.append_messages(c, SESSION, failed, "run-x"))
    await db.write(lambda c: messages.mark_failed_run(c, SESSION, "run-x"))
    loaded, after = await db.read(lambda c: load_window(c, SESSION, 0, 1_500))
    assert after == before
    assert loaded[-1].content == "answer 1"


async def test_the_newest_prompt_and_summary_before_the_cut_lead_and_are_looked_up(
    db: Database, backend: str
) -> None:
    later = [
        ChatMessage.system("persona 2", marker=Marker.AGENT_PROMPT),
        ChatMessage.system("[Compressed History] later", Marker.HISTORY_COMPACTION),
    ]
    history = [*_history(50), *later, *(m for n in range(50, 500) for m in _turn(n))]
    await db.write(lambda c: _store(c, history))
    loaded, _ = await db.read(lambda c: load_window(c, SESSION, 0, 2_000))
    assert [m.content for m in loaded[:2]] == ["persona 2", "[Compressed History] later"]
    assert loaded[2].role is Role.USER
    if backend != "sqlite":
        return  # the plan below is SQLite's (PostgreSQL's planner picks by its statistics)
    # found through the index of marked rows, not by reading every row before the cut
    plan = await db.read(
        lambda c: c.execute(
            "EXPLAIN QUERY PLAN " + LATEST_MARKED, (SESSION, 0, "agent_prompt", 1_000)
        ).fetchall()
    )
    assert any("messages_by_marker" in str(tuple(row)) for row in plan), plan


@pytest.mark.parametrize("budget", [1_000_000, 2_000])
async def test_the_window_is_read_in_one_pass(sqlite_db: SqliteDatabase, budget: int) -> None:
    """The rows measured from the newest back are the rows returned: neither
    the whole segment (when it fits) nor the tail past the cut is read again."""
    db = sqlite_db
    history = _history(200)
    await db.write(lambda c: _store(c, history))
    statements: list[str] = []

    def traced(c: sqlite3.Connection) -> tuple[list[ChatMessage], HistorySize]:
        c.set_trace_callback(statements.append)
        try:
            return load_window(c, SESSION, 0, budget)
        finally:
            c.set_trace_callback(None)

    loaded, _ = await db.read(traced)
    assert loaded[-1].content == "answer 199"
    # beside it, only the look-ups of the latest prompt and summary before a cut
    reads = [s for s in statements if "FROM messages" in s and "marker = " not in s]
    assert len(reads) == 1, statements


async def test_the_sized_columns_are_those_the_window_measures(db: Database) -> None:
    """The window reads role, content, tool calls, reasoning and seq from a
    SELECT_MESSAGES row by position: the positions name those columns."""
    call = ToolCall("call_1", "read", '{"path": "a"}')
    reply = ChatMessage(Role.ASSISTANT, "text", tool_calls=(call,), reasoning_content="thinking")
    await db.write(lambda c: _store(c, [reply]))
    [row] = await db.read(
        lambda c: messages.plain_rows(
            c, f"{messages.SELECT_MESSAGES} WHERE session_id = ?", [SESSION]
        )
    )
    role, content, calls, reasoning, seq = (row[i] for i in messages.SIZED_COLUMNS)
    assert (role, content, reasoning, seq) == ("assistant", "text", "thinking", 1)
    assert '"read"' in calls
    assert '{\\"path\\": \\"a\\"}' in calls
