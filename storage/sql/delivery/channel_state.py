"""Per-channel key/value state (cursors, offsets, context tokens)."""

from __future__ import annotations

import sqlite3

from storage.clock import now_iso

__all__ = ["get_state", "set_state"]


def get_state(conn: sqlite3.Connection, channel: str, key: str) -> str | None:
    row = conn.execute(
        "SELECT value FROM channel_state WHERE channel = ? AND key = ?", (channel, key)
    ).fetchone()
    return None if row is None else str(row[0])


def set_state(conn: sqlite3.Connection, channel: str, key: str, value: str) -> None:
    conn.execute(
        "INSERT INTO channel_state (channel, key, value, updated_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (channel, key) DO UPDATE SET value = excluded.value, "
        "updated_at = excluded.updated_at",
        (channel, key, value, now_iso()),
    )
