"""Sessions and the chat → active session bindings (sync functions for Database)."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from enum import StrEnum

from storage.clock import now_iso

__all__ = [
    "SessionRecord",
    "SessionStatus",
    "active_session",
    "bind_session",
    "chats_with_prefix",
    "create_next_session",
    "create_session",
    "delete_session",
    "ensure_active_session",
    "get_session",
    "list_sessions",
    "recent_sessions",
    "record_from_row",
    "rename_session",
    "set_session_status",
]


class SessionStatus(StrEnum):
    ACTIVE = "active"
    ARCHIVED = "archived"


@dataclass(frozen=True, slots=True)
class SessionRecord:
    id: str
    channel: str
    chat_id: str
    title: str | None
    status: SessionStatus
    segment: int
    next_seq: int
    user_turns: int
    prompt_turn: int | None
    compacted_at: str | None
    created_at: str
    updated_at: str
    message_count: int = 0


_COLUMNS = (
    "id, channel, chat_id, title, status, segment, next_seq, user_turns, prompt_turn, "
    "compacted_at, created_at, updated_at"
)


def record_from_row(row: sqlite3.Row, message_count: int = 0) -> SessionRecord:
    """A session from a row with `_COLUMNS` (by name)."""
    return SessionRecord(
        id=row["id"],
        channel=row["channel"],
        chat_id=row["chat_id"],
        title=row["title"],
        status=SessionStatus(row["status"]),
        segment=row["segment"],
        next_seq=row["next_seq"],
        user_turns=row["user_turns"],
        prompt_turn=row["prompt_turn"],
        compacted_at=row["compacted_at"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        message_count=message_count,
    )


def get_session(conn: sqlite3.Connection, session_id: str) -> SessionRecord | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM sessions WHERE id = ?", (session_id,)).fetchone()
    return record_from_row(row) if row else None


def active_session(conn: sqlite3.Connection, channel: str, chat_id: str) -> SessionRecord | None:
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM sessions WHERE id = "
        "(SELECT session_id FROM chat_bindings WHERE channel = ? AND chat_id = ?)",
        (channel, chat_id),
    ).fetchone()
    return record_from_row(row) if row else None


def bind_session(conn: sqlite3.Connection, channel: str, chat_id: str, session_id: str) -> None:
    conn.execute(
        "INSERT INTO chat_bindings (channel, chat_id, session_id) VALUES (?, ?, ?) "
        "ON CONFLICT (channel, chat_id) DO UPDATE SET session_id = excluded.session_id",
        (channel, chat_id, session_id),
    )


def create_session(
    conn: sqlite3.Connection,
    channel: str,
    chat_id: str,
    session_id: str,
    title: str | None = None,
    *,
    activate: bool = True,
) -> SessionRecord:
    now = now_iso()
    conn.execute(
        "INSERT INTO sessions (id, channel, chat_id, title, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (session_id, channel, chat_id, title, now, now),
    )
    if activate:
        bind_session(conn, channel, chat_id, session_id)
    record = get_session(conn, session_id)
    assert record is not None
    return record


def _number(session_id: str, base_id: str) -> int:
    """1 for `base_id`, n for `base_id#n`, 0 for any other id."""
    if session_id == base_id:
        return 1
    head, _, tail = session_id.rpartition("#")
    return int(tail) if head == base_id and tail.isdigit() else 0


def create_next_session(
    conn: sqlite3.Connection,
    channel: str,
    chat_id: str,
    base_id: str,
    title: str | None = None,
    *,
    after: str | None = None,
) -> SessionRecord:
    """Create and activate a new session: `base_id` if free, else `base_id#2`, `#3`…
    `after`: a session just deleted; the new one is numbered above it, so its
    id is not handed out again at once."""
    n = _number(after, base_id) + 1 if after is not None else 1
    session_id = base_id if n == 1 else f"{base_id}#{n}"
    while get_session(conn, session_id) is not None:
        n += 1
        session_id = f"{base_id}#{n}"
    return create_session(conn, channel, chat_id, session_id, title)


def ensure_active_session(
    conn: sqlite3.Connection, channel: str, chat_id: str, base_id: str
) -> SessionRecord:
    """The conversation's active session; the first one is `base_id` (DESIGN §5)."""
    record = active_session(conn, channel, chat_id)
    if record is not None and record.status is SessionStatus.ACTIVE:
        return record
    return create_next_session(conn, channel, chat_id, base_id)


def list_sessions(conn: sqlite3.Connection, channel: str, chat_id: str) -> list[SessionRecord]:
    rows = conn.execute(
        f"SELECT {_COLUMNS}, (SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id "
        "AND m.segment = s.segment) AS n FROM sessions s "
        "WHERE channel = ? AND chat_id = ? ORDER BY created_at, id",
        (channel, chat_id),
    ).fetchall()
    return [record_from_row(r, r["n"]) for r in rows]


def recent_sessions(
    conn: sqlite3.Connection, channel: str | None, chat_id: str | None, limit: int
) -> list[SessionRecord]:
    """The `limit` sessions active most recently, newest first, across chats
    (or of one channel, or one chat); with their message counts."""
    where, params = [], []
    for column, value in (("channel", channel), ("chat_id", chat_id)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    rows = conn.execute(
        f"SELECT {_COLUMNS}, (SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id "
        "AND m.segment = s.segment) AS n FROM sessions s "
        f"{'WHERE ' + ' AND '.join(where) if where else ''} "
        "ORDER BY updated_at DESC, id LIMIT ?",
        (*params, limit),
    ).fetchall()
    return [record_from_row(r, r["n"]) for r in rows]


def rename_session(conn: sqlite3.Connection, session_id: str, title: str) -> None:
    conn.execute(
        "UPDATE sessions SET title = ?, updated_at = ? WHERE id = ?", (title, now_iso(), session_id)
    )


def set_session_status(conn: sqlite3.Connection, session_id: str, status: SessionStatus) -> None:
    conn.execute(
        "UPDATE sessions SET status = ?, updated_at = ? WHERE id = ?",
        (status.value, now_iso(), session_id),
    )


def delete_session(conn: sqlite3.Connection, session_id: str) -> None:
    """Remove a session, its bindings and its messages for good."""
    conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,))


def chats_with_prefix(conn: sqlite3.Connection, channel: str, prefix: str) -> list[str]:
    """The chat ids of `channel` that begin with `prefix` (compared as text,
    no wildcards) and have a session, in order."""
    rows = conn.execute(
        "SELECT DISTINCT chat_id FROM sessions WHERE channel = ? AND substr(chat_id, 1, ?) = ? "
        "ORDER BY chat_id",
        (channel, len(prefix), prefix),
    ).fetchall()
    return [r[0] for r in rows]
