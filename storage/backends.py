"""`open_database(url)`: the backend `storage.url` names (docs/storage.md)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from storage.database import Database
from storage.url import redact_url, sqlite_path_of

__all__ = ["open_database"]


def open_database(url: str, **options: Any) -> Database:
    """The backend `url` names, not yet opened: `sqlite:///path` (or a plain
    path) or `postgresql://user@host/db`. `options` are the writer's
    (`write_queue_capacity`, `commit_spacing_secs`). Raises ValueError for
    any other scheme."""
    scheme = urlsplit(url).scheme.lower() if "://" in url else ""
    if scheme in ("postgresql", "postgres"):
        from storage.postgres.db import PostgresDatabase  # psycopg only when asked for

        return PostgresDatabase(url, **options)
    if scheme in ("", "sqlite"):
        from storage.sqlite.db import SqliteDatabase

        return SqliteDatabase(sqlite_path_of(url), **options)
    raise ValueError(
        f"storage.url {redact_url(url)!r}: unknown scheme {scheme!r} "
        "(use sqlite:///path/to/file.db or postgresql://user@host/db)"
    )
