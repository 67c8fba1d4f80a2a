"""Chat owners: which principal a chat id of a channel belongs to (sync
functions for Database; the WebSocket channel's clients authenticate as
principals, docs/PROTOCOL.md "Chat ownership").

A chat is claimed by the first principal that uses its id: `claim` inserts
the owner or reads the one already there, in one write, so of two racing
claims exactly one wins. A chat that has history but no owner row was used
before owners were recorded; `legacy_senders` is what the caller decides
its owner from. This module never decides who a principal is.
"""

from __future__ import annotations

import sqlite3

from storage.clock import now_iso

__all__ = ["claim", "legacy_senders", "owner_of"]


def owner_of(conn: sqlite3.Connection, channel: str, chat_id: str) -> str | None:
    row = conn.execute(
        "SELECT owner FROM chat_owners WHERE channel = ? AND chat_id = ?", (channel, chat_id)
    ).fetchone()
    return None if row is None else str(row[0])


def legacy_senders(conn: sqlite3.Connection, channel: str, chat_id: str) -> list[str] | None:
    """None when the chat has no history at all (a new chat); else up to two
    distinct senders of its stored inbound messages (empty when they were
    pruned but its sessions remain): enough to tell "one sender" from "several"."""
    rows = conn.execute(
        "SELECT DISTINCT sender_id FROM inbox WHERE channel = ? AND chat_id = ? LIMIT 2",
        (channel, chat_id),
    ).fetchall()
    if rows:
        return [str(r[0]) for r in rows]
    used = conn.execute(  # both lookups are indexed by (channel, chat_id)
        "SELECT 1 FROM sessions WHERE channel = ? AND chat_id = ? LIMIT 1", (channel, chat_id)
    ).fetchone()
    return [] if used is not None else None


def claim(conn: sqlite3.Connection, channel: str, chat_id: str, owner: str) -> str:
    """Record `owner` unless the chat has one; the chat's owner either way."""
    conn.execute(
        "INSERT INTO chat_owners (channel, chat_id, owner, claimed_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (channel, chat_id) DO NOTHING",
        (channel, chat_id, owner, now_iso()),
    )
    found = owner_of(conn, channel, chat_id)
    assert found is not None  # inserted or already there, in this transaction
    return found
