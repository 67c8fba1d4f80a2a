"""`picobot backup` and `picobot restore`: copies of the SQLite database.

Backup is online (a running gateway keeps writing), restore is offline (it
refuses while the database is in use unless forced). How the copy is made,
checked and put in place is `storage.sqlite.backup`'s job; this module reports the
outcome and turns it into an exit code. Neither ever writes to the source
database's content.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import TextIO

from storage.sqlite.backup import BackupError, backup_database, restore_database

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


async def run_backup(db_path: Path, dest: Path, *, out: TextIO | None = None) -> int:
    """Copy the live database to `dest`; prints the row counts. 0 on success."""
    stream = sys.stdout if out is None else out
    try:
        report = await asyncio.to_thread(backup_database, db_path, dest)
    except BackupError as exc:
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


def run_restore(backup: Path, db_path: Path, *, force: bool, out: TextIO | None = None) -> int:
    """Replace the database with `backup`. Refuses while the database is in use."""
    stream = sys.stdout if out is None else out

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
