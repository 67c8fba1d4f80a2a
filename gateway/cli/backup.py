"""`picobot backup` and `picobot restore`: copies of the database, one SQLite file.

Backup is online (a running gateway keeps writing), restore is offline (it
refuses while the database is in use unless forced). How the copy is made,
checked and put in place is `storage.sqlite.backup`'s job, and on PostgreSQL
`storage.copy`'s (a snapshot copied into a new SQLite file, and that file
copied back into an empty database): a backup is one portable file on both
backends. This module reports the outcome and turns it into an exit code.
Neither ever writes to the source database's content.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import TextIO

from storage.sqlite.backup import BackupError, BackupReport, backup_database, restore_database
from storage.url import is_postgres_url, sqlite_path_of

__all__ = [
    "add_backup_arguments",
    "add_restore_arguments",
    "run_backup",
    "run_restore",
]


def add_backup_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, help="where to write the copy (a file or a directory)")


def add_restore_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, help="a file written by `picobot backup`")
    parser.add_argument(
        "--force",
        action="store_true",
        help="restore even though the database is in use (stop the gateway instead!)",
    )


async def run_backup(database: Path | str, dest: Path, *, out: TextIO | None = None) -> int:
    """Copy the live database (a SQLite file, or the `storage.url`) to `dest`;
    prints the row counts. 0 on success."""
    stream = sys.stdout if out is None else out
    try:
        report = await _backup(database, dest)
    except Exception as exc:
        if not _expected(exc):
            raise
        print(f"backup failed: {exc}", file=stream)
        return 1
    print(
        f"backup written: {report.path} ({report.size} bytes, schema version "
        f"{report.schema_version}, integrity ok)",
        file=stream,
    )
    for table, count in sorted(report.counts.items()):
        print(f"  {table}: {count} rows", file=stream)
    return 0


async def _backup(database: Path | str, dest: Path) -> BackupReport:
    if isinstance(database, str) and is_postgres_url(database):
        from storage.copy import backup_postgres

        return await backup_postgres(database, dest)
    return await asyncio.to_thread(backup_database, _sqlite_path(database), dest)


def _sqlite_path(database: Path | str) -> Path:
    return database if isinstance(database, Path) else Path(sqlite_path_of(database))


def _expected(exc: Exception) -> bool:
    """Whether `exc` is a refusal to report in one line (not a bug)."""
    if isinstance(exc, BackupError):
        return True
    from storage.copy import CopyError
    from storage.errors import SchemaTooNew, StorageUnavailable, StorageUnusable

    return isinstance(exc, CopyError | SchemaTooNew | StorageUnusable | StorageUnavailable)


def run_restore(
    backup: Path, database: Path | str, *, force: bool, out: TextIO | None = None
) -> int:
    """Replace the database (a SQLite file, or the `storage.url`) with
    `backup`. Refuses while the database is in use (SQLite) or holds rows
    (PostgreSQL), unless `force`."""
    stream = sys.stdout if out is None else out
    if isinstance(database, str) and is_postgres_url(database):
        return asyncio.run(restore_into_postgres(backup, database, force=force, out=stream))
    db_path = _sqlite_path(database)

    def forced() -> None:
        print("warning: the database is in use; restoring anyway (--force)", file=stream)

    try:
        aside = restore_database(backup, db_path, force=force, on_forced=forced)
    except BackupError as exc:
        print(f"restore refused: {exc}", file=stream)
        return 1
    print(f"restored {backup} -> {db_path}", file=stream)
    if aside is not None:
        print(f"the previous database is kept at {aside}", file=stream)
    print("start the gateway again (systemctl start picobot)", file=stream)
    return 0


async def restore_into_postgres(
    backup: Path, url: str, *, force: bool, out: TextIO | None = None
) -> int:
    """Copy the SQLite backup into the PostgreSQL database `url`: refused when
    it holds rows, unless `force` (then emptied first, in the same transaction)."""
    from storage.copy import restore_postgres

    stream = sys.stdout if out is None else out
    try:
        report = await restore_postgres(backup, url, force=force)
    except Exception as exc:
        if not _expected(exc):
            raise
        print(f"restore refused: {exc}", file=stream)
        return 1
    for table, count in report.counts.items():
        print(f"  {table}: {count} rows", file=stream)
    print(f"restored {backup} -> {report.target} ({report.total} rows)", file=stream)
    print("start the gateway again (systemctl start picobot)", file=stream)
    return 0
