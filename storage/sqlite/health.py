"""A read-only look at a database file, for `picobot doctor`.

Opens the file read-only with its own plain connection (never a `Database`),
so it never creates, migrates or writes anything, whether or not a gateway
has the database open. Blocking: run it in a thread.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from storage.sql.delivery.outbox import OutboxState, unsent_counts

__all__ = ["DatabaseHealth", "UnreadableDatabase", "inspect_database"]


class UnreadableDatabase(Exception):
    """The file cannot be opened or read as SQLite; the message is SQLite's."""


@dataclass(frozen=True, slots=True)
class DatabaseHealth:
    schema_version: int
    integrity: list[str]  # what `PRAGMA integrity_check` said: ["ok"] when intact
    failed_outbox: int  # outbox rows that gave up (0 without an outbox table)


def inspect_database(path: Path, *, timeout_secs: float = 5.0) -> DatabaseHealth:
    """Schema version, integrity and failed outbox rows of the database at `path`,
    which must exist. Raises UnreadableDatabase."""
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=timeout_secs)
        try:
            version: int = conn.execute("PRAGMA user_version").fetchone()[0]
            integrity = [row[0] for row in conn.execute("PRAGMA integrity_check")]
            failed = _failed_outbox(conn)
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise UnreadableDatabase(str(exc)) from exc
    return DatabaseHealth(version, integrity, failed)


def _failed_outbox(conn: sqlite3.Connection) -> int:
    try:
        counts = unsent_counts(conn)
    except sqlite3.Error:  # no outbox table (yet)
        return 0
    return counts.get(OutboxState.FAILED.value, 0)
