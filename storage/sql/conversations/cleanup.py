"""Housekeeping on the `sessions` table run by the scheduler's `session_cleanup` event.

A synchronous function of a `sqlite3.Connection` for `Database.write`. It only
changes a session's status; messages are never deleted here.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

__all__ = ["archive_idle_sessions"]


def archive_idle_sessions(conn: sqlite3.Connection, cutoff: datetime) -> int:
    """Archive active sessions last updated before `cutoff`; returns how many were archived.

    `julianday` compares the stored ISO texts as instants, whatever offset or
    precision the writer used. `updated_at` is left alone: it means last activity.
    """
    if cutoff.tzinfo is None:
        raise ValueError("naive datetime passed to storage")
    cur = conn.execute(
        "UPDATE sessions SET status = 'archived' "
        "WHERE status = 'active' AND julianday(updated_at) < julianday(?)",
        (cutoff.astimezone(UTC).isoformat(timespec="microseconds"),),
    )
    return cur.rowcount
