"""Where the two engines differ beyond what the PostgreSQL connection
translates (storage/postgres/connection.py): the few statements written
twice, chosen by `is_postgres(conn)`, and a portable way to read a new id.
"""

from __future__ import annotations

import sqlite3
from typing import Any

__all__ = ["inserted_id", "is_postgres"]


def is_postgres(conn: sqlite3.Connection) -> bool:
    return getattr(conn, "is_postgres", False)


def inserted_id(cursor: Any) -> int | None:
    """The id an `INSERT … RETURNING id` produced, None when it inserted
    nothing (`ON CONFLICT DO NOTHING`). Reads the cursor to its end, so that
    SQLite finishes the statement before the transaction commits."""
    rows = cursor.fetchall()
    return int(rows[0][0]) if rows else None
