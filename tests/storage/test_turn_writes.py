"""What a turn's writes cost SQLite: pages written to the WAL, NULLs bound."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from agent.messages import ChatMessage
from storage.sql.conversations.messages import append_messages
from storage.sql.conversations.sessions import create_session, list_sessions
from storage.sqlite.db import Database


def _wal_frames(conn: sqlite3.Connection) -> int:
    frames: int = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1]
    return frames


async def test_a_turns_update_of_its_session_row_writes_one_page(tmp_path: Path) -> None:
    """Each turn updates its session's next_seq and activity time (what
    append_messages writes besides the rows); no index holds those columns,
    so only the session row's own page goes to the WAL."""
    path = tmp_path / "db.sqlite"
    async with Database(path):
        pass  # migrated
    conn = sqlite3.connect(path, isolation_level=None)
    conn.row_factory = sqlite3.Row
    try:
        for n in range(400):  # enough sessions for the table and its indexes to hold many pages
            create_session(conn, "telegram", f"chat-{n}", f"telegram:chat-{n}", None)
        append_messages(conn, "telegram:chat-7", [ChatMessage.user("hi")])
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the WAL starts over: empty

        conn.execute("BEGIN IMMEDIATE")
        append_messages(conn, "telegram:chat-7", [])  # a turn's own update, without its rows
        conn.execute("COMMIT")
        assert _wal_frames(conn) == 1

        # a chat's sessions are still found through the index, listed as before
        plan = conn.execute(
            "EXPLAIN QUERY PLAN SELECT id FROM sessions WHERE channel = ? AND chat_id = ?",
            ("telegram", "chat-7"),
        ).fetchall()
        assert any("sessions_by_chat" in str(tuple(row)) for row in plan), plan
        assert [s.id for s in list_sessions(conn, "telegram", "chat-7")] == ["telegram:chat-7"]
    finally:
        conn.close()


def test_none_binds_as_null_through_a_registered_adapter() -> None:
    """storage.sqlite.db registers one for None (the module's own lookup for an
    unregistered None raises and clears an AttributeError per value)."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE TABLE t (a, b)")
        conn.execute("INSERT INTO t VALUES (?, ?)", (None, "x"))
        assert conn.execute("SELECT typeof(a), b FROM t").fetchall() == [("null", "x")]
    finally:
        conn.close()
    assert sqlite3.adapters.get((type(None), sqlite3.PrepareProtocol)) is not None
