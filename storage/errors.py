"""What storage raises when the database, not the data, is the problem.

    Exception
     ├── StorageUnavailable   a write (or read) the database refused for now:
     │                        busy past the busy timeout, disk full, an I/O
     │                        error, a read-only file; retry once writes pass
     │    └── FenceLost       a write of a turn refused: this worker no longer
     │                        holds the chat's lease (another took it over);
     │                        never retried here (docs/scale-out.md)
     ├── StorageUnusable      the database cannot be opened at all at start
     │                        (an unwritable home, a file where a folder must be,
     │                        a server that refuses the login)
     ├── SchemaTooNew         written by a newer picobot; not touched
     ├── StorageClosed        used after close
     └── DatabaseError        what the PostgreSQL driver raised about a statement,
          └── IntegrityError  in DB-API terms (SQLite raises sqlite3's own)

`unavailable(exc)` tells a sqlite3 error of the first kind from one that is
about the statement (a refused constraint, a bug); the PostgreSQL backend
raises StorageUnavailable itself (storage/postgres/connection.py). Imports
nothing of the project.
"""

from __future__ import annotations

import sqlite3
from typing import Final

__all__ = [
    "DatabaseError",
    "FenceLost",
    "IntegrityError",
    "SchemaTooNew",
    "StorageClosed",
    "StorageUnavailable",
    "StorageUnusable",
    "unavailable",
]

# primary result codes (the low byte of an extended one) that say the database
# cannot take writes right now, whatever was written
_TRANSIENT: Final = frozenset(
    {
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
        sqlite3.SQLITE_READONLY,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_CANTOPEN,
    }
)


class StorageUnavailable(Exception):
    """The database refused work for a reason outside it; `reason` is SQLite's."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class FenceLost(StorageUnavailable):
    """A write checked against lease `key` found another worker holding it (or
    this worker expired): nothing of the write was committed. The worker must
    give the chat up, not retry."""

    def __init__(self, key: str) -> None:
        super().__init__(f"lease {key} is no longer this worker's")
        self.key = key


class StorageUnusable(Exception):
    """The database cannot be opened; the message says which path and why."""


class SchemaTooNew(Exception):
    """The database was written by a newer picobot; refuse to touch it."""


class StorageClosed(Exception):
    pass


class DatabaseError(Exception):
    """The PostgreSQL driver's error about a statement (not the server's health)."""


class IntegrityError(DatabaseError):
    """A constraint refused the statement (a duplicate key, a missing reference)."""


def unavailable(exc: BaseException) -> StorageUnavailable | None:
    """`exc` as a StorageUnavailable when it is one (or already is), else None.
    A FenceLost is the one write's own failure, not the database's."""
    if isinstance(exc, FenceLost):
        return None
    if isinstance(exc, StorageUnavailable):
        return exc
    if not isinstance(exc, sqlite3.Error):
        return None
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and code & 0xFF in _TRANSIENT:
        return StorageUnavailable(str(exc))
    return None
