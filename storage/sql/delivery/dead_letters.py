"""Dead letters: inbound events that could not be parsed or recorded.

A channel that meets such an event (a platform update its SDK cannot decode,
a message the inbox refuses to store) keeps it here and moves its cursor past
it, so one poison event never stalls the chats behind it. Nothing here is
answered by itself: `picobot dead-letters list|show` (and the console) is how
an operator sees them; one that is a message the gateway wrote (the inbox
refused it, or it was set aside at start) can be recorded again
(storage.sql.delivery.inbox.requeue_dead_letter); any can be discarded. The
payload is stored as text, capped at `PAYLOAD_MAX_CHARS`.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from gateway.bus import storable
from storage.clock import now_iso
from storage.sql.dialect import inserted_id

__all__ = ["PAYLOAD_MAX_CHARS", "DeadLetter", "discard", "get", "recent", "record"]

PAYLOAD_MAX_CHARS = 16_384


@dataclass(frozen=True, slots=True)
class DeadLetter:
    id: int
    channel: str
    platform_id: str | None
    payload: str
    truncated: bool
    reason: str
    created_at: str


def _text(payload: str | bytes) -> str:
    if isinstance(payload, bytes):
        return payload.decode("utf-8", errors="replace")
    return storable(payload)


def record(
    conn: sqlite3.Connection,
    channel: str,
    platform_id: str | None,
    payload: str | bytes,
    reason: str,
) -> int:
    """Store one dead letter; its id."""
    text = _text(payload)
    cursor = conn.execute(
        "INSERT INTO dead_letters (channel, platform_id, payload, truncated, reason, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
        (
            storable(channel),
            storable(platform_id) if platform_id is not None else None,
            text[:PAYLOAD_MAX_CHARS],
            int(len(text) > PAYLOAD_MAX_CHARS),
            storable(reason)[:500],
            now_iso(),
        ),
    )
    row_id = inserted_id(cursor)
    assert row_id is not None
    return row_id


def _letter(row: sqlite3.Row) -> DeadLetter:
    return DeadLetter(
        row["id"],
        row["channel"],
        row["platform_id"],
        row["payload"],
        bool(row["truncated"]),
        row["reason"],
        row["created_at"],
    )


def recent(conn: sqlite3.Connection, limit: int, channel: str | None = None) -> list[DeadLetter]:
    """The newest `limit` dead letters (of `channel`, if given), newest first."""
    rows = conn.execute(
        "SELECT * FROM dead_letters WHERE CAST(? AS TEXT) IS NULL OR channel = ? "
        "ORDER BY id DESC LIMIT ?",
        (channel, channel, limit),
    ).fetchall()
    return [_letter(r) for r in rows]


def get(conn: sqlite3.Connection, letter_id: int) -> DeadLetter | None:
    row = conn.execute("SELECT * FROM dead_letters WHERE id = ?", (letter_id,)).fetchone()
    return _letter(row) if row is not None else None


def discard(conn: sqlite3.Connection, letter_id: int) -> bool:
    """Delete one dead letter; False when there is none of that id."""
    return conn.execute("DELETE FROM dead_letters WHERE id = ?", (letter_id,)).rowcount == 1
