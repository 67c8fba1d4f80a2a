"""commit_compaction: a new segment atomically, originals archived, conflicts abort."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator

import pytest

from agent.compaction import compact
from agent.messages import ChatMessage, Marker, Role, ToolCall
from agent.providers.base import ProviderSettings
from agent.providers.openai import OpenAIProvider
from storage.database import Database
from storage.sql.conversations.compaction import CompactionConflict, commit_compaction
from tests.fakes.openai_server import FakeOpenAI
from tests.storage.conftest import OpenStorage

SESSION = "telegram:42"
T0 = "2026-11-29T10:00:00+00:00"
COMPACTED_AT = "2026-11-29T12:00:00+00:00"


@pytest.fixture
async def db(open_storage: OpenStorage) -> AsyncIterator[Database]:
    async with open_storage() as database:
        yield database


def _create_session(conn: sqlite3.Connection, segment: int = 0, next_seq: int = 1) -> None:
    conn.execute(
        "INSERT INTO sessions (id, channel, chat_id, segment, next_seq, created_at, updated_at) "
        "VALUES (?, 'telegram', '42', ?, ?, ?, ?)",
        (SESSION, segment, next_seq, T0, T0),
    )


def _insert(
    conn: sqlite3.Connection, seq: int, segment: int, message: ChatMessage, run_id: str
) -> None:
    conn.execute(
        "INSERT INTO messages (session_id, seq, segment, role, content, tool_calls, "
        "tool_call_id, name, marker, run_id, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        (
            SESSION,
            seq,
            segment,
            message.role.value,
            message.content,
            message.tool_calls_json(),
            message.tool_call_id,
            message.name,
            message.marker,
            run_id,
            T0,
        ),
    )
    conn.execute("UPDATE sessions SET next_seq = ? WHERE id = ?", (seq + 1, SESSION))


def _seed(conn: sqlite3.Connection) -> None:
    """Segment 0: an agent prompt and two tool turns, seqs 1..9."""
    _create_session(conn)
    call_1 = ToolCall("call_1", "read", '{"path": "a.txt"}')
    call_2 = ToolCall("call_2", "bash", '{"cmd": "ls"}')
    messages = [
        ChatMessage.system("persona", marker=Marker.AGENT_PROMPT),
        ChatMessage.user("read a.txt"),
        ChatMessage(Role.ASSISTANT, "", tool_calls=(call_1,)),
        ChatMessage.tool_result(call_1, "alpha"),
        ChatMessage(Role.ASSISTANT, "it says alpha"),
        ChatMessage.user("list files"),
        ChatMessage(Role.ASSISTANT, "", tool_calls=(call_2,)),
        ChatMessage.tool_result(call_2, "a.txt b.txt"),
        ChatMessage(Role.ASSISTANT, "two files"),
    ]
    for seq, message in enumerate(messages, start=1):
        _insert(conn, seq, 0, message, run_id=f"run-{1 if seq < 6 else 2}")


def _rows(conn: sqlite3.Connection, segment: int) -> list[sqlite3.Row]:
    return conn.execute(
        "SELECT * FROM messages WHERE session_id = ? AND segment = ? ORDER BY seq",
        (SESSION, segment),
    ).fetchall()


def _load(conn: sqlite3.Connection, segment: int) -> list[ChatMessage]:
    return [
        ChatMessage(
            Role(r["role"]),
            r["content"],
            tool_calls=ChatMessage.parse_tool_calls(r["tool_calls"]),
            tool_call_id=r["tool_call_id"],
            name=r["name"],
            marker=r["marker"],
            seq=r["seq"],
        )
        for r in _rows(conn, segment)
    ]


def _session(conn: sqlite3.Connection) -> sqlite3.Row:
    row: sqlite3.Row = conn.execute("SELECT * FROM sessions WHERE id = ?", (SESSION,)).fetchone()
    return row


def _summary() -> ChatMessage:
    return ChatMessage.system(
        "[Compressed History]\nuser read a.txt (alpha)", marker=Marker.HISTORY_COMPACTION
    )


async def test_commit_starts_a_new_segment_and_archives_the_old_one(db: Database) -> None:
    await db.write(_seed)
    history = await db.read(lambda c: _load(c, 0))
    kept, recent = history[:1], history[5:]  # agent prompt; the "list files" turn
    new_history = [*kept, _summary(), *recent]

    segment = await db.write(lambda c: commit_compaction(c, SESSION, 0, new_history, COMPACTED_AT))

    assert segment == 1
    session = await db.read(_session)
    assert (session["segment"], session["next_seq"]) == (1, 16)
    assert session["compacted_at"] == COMPACTED_AT
    archived = await db.read(lambda c: _rows(c, 0))
    assert [r["seq"] for r in archived] == list(range(1, 10))  # nothing deleted
    active = await db.read(lambda c: _rows(c, 1))
    assert [r["seq"] for r in active] == list(range(10, 16))
    assert [(r["role"], r["content"]) for r in active] == [
        ("system", "persona"),
        ("system", "[Compressed History]\nuser read a.txt (alpha)"),
        ("user", "list files"),
        ("assistant", ""),
        ("tool", "a.txt b.txt"),
        ("assistant", "two files"),
    ]
    assert active[1]["marker"] == Marker.HISTORY_COMPACTION
    assert active[1]["run_id"] is None
    # kept messages are row copies: run ids and tool calls survive
    assert [r["run_id"] for r in active[2:]] == ["run-2"] * 4
    assert json.loads(active[3]["tool_calls"])[0]["id"] == "call_2"
    assert active[4]["tool_call_id"] == "call_2"
    assert active[4]["name"] == "bash"


async def test_a_stale_segment_aborts_and_changes_nothing(db: Database) -> None:
    await db.write(_seed)
    history = await db.read(lambda c: _load(c, 0))
    await db.write(lambda c: commit_compaction(c, SESSION, 0, history[5:], COMPACTED_AT))
    before = await db.read(lambda c: c.execute("SELECT COUNT(*) FROM messages").fetchone()[0])

    with pytest.raises(CompactionConflict, match="expected 0"):
        await db.write(
            lambda c: commit_compaction(c, SESSION, 0, [_summary(), *history[5:]], COMPACTED_AT)
        )

    session = await db.read(_session)
    assert (session["segment"], session["next_seq"]) == (1, 14)
    after = await db.read(lambda c: c.execute("SELECT COUNT(*) FROM messages").fetchone()[0])
    assert after == before


async def test_a_kept_message_missing_from_the_segment_rolls_everything_back(
    db: Database,
) -> None:
    await db.write(_seed)
    history = await db.read(lambda c: _load(c, 0))
    ghost = ChatMessage(Role.USER, "never stored", seq=99)

    with pytest.raises(CompactionConflict, match="seq 99"):
        await db.write(
            lambda c: commit_compaction(
                c, SESSION, 0, [history[0], _summary(), ghost], COMPACTED_AT
            )
        )

    session = await db.read(_session)
    assert (session["segment"], session["next_seq"], session["compacted_at"]) == (0, 10, None)
    assert await db.read(lambda c: _rows(c, 1)) == []
    assert len(await db.read(lambda c: _rows(c, 0))) == 9


async def test_a_missing_session_is_a_conflict(db: Database) -> None:
    with pytest.raises(CompactionConflict, match="no longer exists"):
        await db.write(lambda c: commit_compaction(c, SESSION, 0, [_summary()], COMPACTED_AT))


async def test_messages_appended_after_the_snapshot_are_carried_over(db: Database) -> None:
    await db.write(_seed)
    history = await db.read(lambda c: _load(c, 0))
    snapshot_last_seq = history[-1].seq
    assert snapshot_last_seq == 9

    def next_turn(conn: sqlite3.Connection) -> None:  # runs while the summary is written
        _insert(conn, 10, 0, ChatMessage.user("and b.txt?"), run_id="run-3")
        _insert(conn, 11, 0, ChatMessage(Role.ASSISTANT, "beta"), run_id="run-3")

    await db.write(next_turn)

    await db.write(
        lambda c: commit_compaction(
            c,
            SESSION,
            0,
            [*history[:1], _summary(), *history[5:]],
            COMPACTED_AT,
            snapshot_last_seq=snapshot_last_seq,
        )
    )

    active = await db.read(lambda c: _rows(c, 1))
    assert [r["content"] for r in active[-3:]] == ["two files", "and b.txt?", "beta"]
    assert [r["seq"] for r in active] == list(range(12, 20))
    assert (await db.read(_session))["next_seq"] == 20
    assert len(await db.read(lambda c: _rows(c, 0))) == 11


async def test_compacting_a_stored_history_end_to_end(db: Database) -> None:
    def seed(conn: sqlite3.Connection) -> None:
        _create_session(conn)
        messages = [ChatMessage.system("persona", marker=Marker.AGENT_PROMPT)]
        for n in range(1, 6):
            call = ToolCall(f"call_{n}", "read", f'{{"path": "f{n}.txt"}}')
            messages += [
                ChatMessage.user(f"question {n}"),
                ChatMessage(Role.ASSISTANT, "", tool_calls=(call,)),
                ChatMessage.tool_result(call, f"content {n}"),
                ChatMessage(Role.ASSISTANT, f"answer {n}"),
            ]
        for seq, message in enumerate(messages, start=1):
            _insert(conn, seq, 0, message, run_id=f"run-{seq}")

    await db.write(seed)
    history = await db.read(lambda c: _load(c, 0))
    async with FakeOpenAI() as llm:
        llm.add_text("read f1.txt and f2.txt")
        provider = OpenAIProvider(
            ProviderSettings(name="default", api_key="k", base_url=llm.base_url)
        )
        try:
            result = await compact(history, provider, "m", 128_000, 3, timeout_secs=5)
        finally:
            await provider.aclose()
    assert result is not None

    await db.write(
        lambda c: commit_compaction(
            c, SESSION, 0, result.new_history, COMPACTED_AT, snapshot_last_seq=history[-1].seq
        )
    )

    active = await db.read(lambda c: _load(c, 1))
    assert [(m.role, m.content) for m in active] == [
        (m.role, m.content) for m in result.new_history
    ]
    assert active[1].content == "[Compressed History]\nread f1.txt and f2.txt"
    assert [m.content for m in active if m.role is Role.USER] == [
        "question 3",
        "question 4",
        "question 5",
    ]
    archived = await db.read(lambda c: _load(c, 0))
    assert [(m.seq, m.content) for m in archived] == [(m.seq, m.content) for m in history]
