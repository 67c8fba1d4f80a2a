"""The transcript: messages of a session, in real order, by segment."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any, Final

from agent.messages import ChatMessage, Marker, Role, Usage, settle_session_messages
from storage.clock import now_iso, parse_iso

__all__ = [
    "INSERT_MESSAGE",
    "SELECT_MESSAGES",
    "SIZED_COLUMNS",
    "append_messages",
    "bound_position",
    "count_messages",
    "load_active_history",
    "load_recent",
    "load_segment",
    "mark_failed_run",
    "message_from_row",
    "message_row",
    "messages_from_rows",
    "plain_rows",
]

INSERT_MESSAGE = (
    "INSERT INTO messages (session_id, seq, segment, role, content, tool_calls, tool_call_id, "
    "name, reasoning_content, media, marker, usage, run_id, created_at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)

# What a message is read back from, in the order `message_from_row` takes it
# (run_id last, for those who need it). Rows are read as plain tuples
# (`plain_rows`): a turn that opens a long history converts thousands of them.
SELECT_MESSAGES = (
    "SELECT role, content, tool_calls, tool_call_id, name, reasoning_content, media, marker, "
    "usage, created_at, seq, run_id FROM messages"
)
# where role, content, tool_calls, reasoning_content and seq are in a
# SELECT_MESSAGES row: what a reader that only measures rows takes
# (storage.sql.conversations.history_window)
SIZED_COLUMNS: Final = (0, 1, 2, 5, 10)
_ROLES = {role.value: role for role in Role}


def plain_rows(conn: sqlite3.Connection, sql: str, args: Sequence[object]) -> list[tuple[Any, ...]]:
    """The rows of `sql` as tuples, whatever the connection's row factory."""
    cursor = conn.cursor()
    cursor.row_factory = None
    try:
        return cursor.execute(sql, args).fetchall()
    finally:
        cursor.close()


def message_row(
    session_id: str, seq: int, segment: int, message: ChatMessage, run_id: str | None
) -> tuple[str | int | None, ...]:
    """The INSERT_MESSAGE parameters for `message`."""
    return (
        session_id,
        seq,
        segment,
        message.role.value,
        message.content,
        message.tool_calls_json(),
        message.tool_call_id,
        message.name,
        message.reasoning_content,
        json.dumps(list(message.media)) if message.media else None,
        message.marker,
        json.dumps(message.usage.to_dict()) if message.usage else None,
        run_id,
        message.created_at.isoformat(),
    )


def bound_position(
    conn: sqlite3.Connection, channel: str, chat_id: str, session_id: str
) -> tuple[int, int, int] | None:
    """(segment, next_seq, user_turns) of `session_id` if it is the chat's
    active session (bound to the chat, not archived), else None."""
    row = conn.execute(
        "SELECT s.segment, s.next_seq, s.user_turns FROM chat_bindings b "
        "JOIN sessions s ON s.id = b.session_id "
        "WHERE b.channel = ? AND b.chat_id = ? AND b.session_id = ? AND s.status = 'active'",
        (channel, chat_id, session_id),
    ).fetchone()
    return None if row is None else (row[0], row[1], row[2])


def append_messages(
    conn: sqlite3.Connection,
    session_id: str,
    messages: Sequence[ChatMessage],
    run_id: str | None = None,
    *,
    user_turn_prompt: bool = False,
    position: tuple[int, int, int] | None = None,
) -> list[int]:
    """Append to the session's active segment; assigns and returns the seqs.

    `user_turn_prompt` records that AGENT.md was injected at this user turn.
    `position` is the session's (segment, next_seq, user_turns) when the
    caller has just read it.
    """
    if position is None:
        row = conn.execute(
            "SELECT segment, next_seq, user_turns FROM sessions WHERE id = ?", (session_id,)
        ).fetchone()
        if row is None:
            raise KeyError(f"no session {session_id!r}")
        position = (row[0], row[1], row[2])
    segment, seq, user_turns = position
    seqs: list[int] = []
    rows = []
    for message in messages:
        rows.append(message_row(session_id, seq, segment, message, run_id))
        message.seq = seq
        seqs.append(seq)
        seq += 1
        if message.role is Role.USER:
            user_turns += 1
    conn.executemany(INSERT_MESSAGE, rows)
    conn.execute(
        "UPDATE sessions SET next_seq = ?, user_turns = ?, updated_at = ?"
        + (", prompt_turn = ?" if user_turn_prompt else "")
        + " WHERE id = ?",
        (seq, user_turns, now_iso(), *((user_turns,) if user_turn_prompt else ()), session_id),
    )
    return seqs


def message_from_row(row: Sequence[Any]) -> ChatMessage:
    """A message from a row of `SELECT_MESSAGES` (the schema decides the types)."""
    role, content, calls, call_id, name, reasoning, media, marker, usage, created, seq = row[:11]
    return ChatMessage(
        _ROLES[role],
        content,
        ChatMessage.parse_tool_calls(calls) if calls else (),
        call_id,
        name,
        reasoning,
        tuple(json.loads(media)) if media else (),
        marker,
        Usage.from_dict(json.loads(usage)) if usage else None,
        parse_iso(created),
        seq,
    )


def load_segment(conn: sqlite3.Connection, session_id: str, segment: int) -> list[ChatMessage]:
    """The segment's messages in order, without those of failed turns (a
    session message sent during a tool batch after the batch's results:
    `settle_session_messages`)."""
    rows = plain_rows(
        conn,
        f"{SELECT_MESSAGES} WHERE session_id = ? AND segment = ? AND marker IS NOT ? ORDER BY seq",
        (session_id, segment, Marker.FAILED_TURN.value),
    )
    return messages_from_rows(rows)


def messages_from_rows(rows: Sequence[Sequence[Any]]) -> list[ChatMessage]:
    """A run of a segment's rows (of `SELECT_MESSAGES`), in seq order, as the
    history holds them (a session message sent during a tool batch after the
    batch's results)."""
    return settle_session_messages([message_from_row(r) for r in rows])


def load_recent(
    conn: sqlite3.Connection, session_id: str, segment: int, limit: int
) -> tuple[list[tuple[ChatMessage, str | None]], bool]:
    """The segment's newest `limit` messages in order, each with the run id of
    the turn that wrote it, failed turns left out; and whether older ones exist."""
    rows = plain_rows(
        conn,
        f"{SELECT_MESSAGES} WHERE session_id = ? AND segment = ? "
        "AND marker IS NOT ? ORDER BY seq DESC LIMIT ?",
        (session_id, segment, Marker.FAILED_TURN.value, limit + 1),
    )
    return [(message_from_row(r), r[11]) for r in reversed(rows[:limit])], len(rows) > limit


def mark_failed_run(conn: sqlite3.Connection, session_id: str, run_id: str) -> None:
    """Leave a failed turn's messages out of later histories (AGENT.md stays):
    the user, told that it failed, asks again rather than have it answered twice."""
    conn.execute(
        "UPDATE messages SET marker = ? WHERE session_id = ? AND run_id = ? AND role != 'system'",
        (Marker.FAILED_TURN.value, session_id, run_id),
    )


def load_active_history(conn: sqlite3.Connection, session_id: str) -> list[ChatMessage]:
    row = conn.execute("SELECT segment FROM sessions WHERE id = ?", (session_id,)).fetchone()
    return [] if row is None else load_segment(conn, session_id, row["segment"])


def count_messages(conn: sqlite3.Connection, session_id: str) -> int:
    row = conn.execute(
        "SELECT COUNT(*) FROM messages WHERE session_id = ?", (session_id,)
    ).fetchone()
    return int(row[0])
