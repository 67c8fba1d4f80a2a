"""Copies of the database file: online backup and offline restore.

Backup is online: SQLite's backup API copies the database in one step from
its own read transaction, so it sees one consistent snapshot while a running
gateway keeps writing (WAL lets readers and the writer proceed together). The
copy is written beside the destination, checked (`integrity_check`), made a
self-contained rollback-journal file and only then renamed into place.

Restore is offline: it refuses while any connection holds the database (a
running gateway, a backup in progress) unless forced, keeps the current
database aside, removes the stale -wal/-shm files and renames the copy in.
Neither ever writes to the source database's content. Both block: run them
in a thread. They use their own plain connections, never a `Database`.

Errors: `BackupError` (the message says why and what to do) > `DatabaseInUse`.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from storage.sqlite.migrations import MIGRATIONS

__all__ = [
    "BackupError",
    "BackupReport",
    "DatabaseInUse",
    "backup_database",
    "check_backup",
    "resolve_destination",
    "restore_database",
    "seal_file",
]


class BackupError(Exception):
    """The copy cannot be made or used; the message says why and what to do."""


class DatabaseInUse(BackupError):
    pass


@dataclass(frozen=True, slots=True)
class BackupReport:
    path: Path
    size: int
    schema_version: int
    counts: dict[str, int]


def backup_database(db_path: Path, dest: Path) -> BackupReport:
    """Copy the live database to `dest` (a file, or a directory to put a
    timestamped file in). Blocking: run it in a thread. Raises BackupError."""
    if not db_path.is_file():
        raise BackupError(f"database {db_path} does not exist (check storage.path / PICOBOT_HOME)")
    dest = resolve_destination(dest)
    partial = dest.with_name(dest.name + ".partial")
    partial.unlink(missing_ok=True)
    try:
        version, counts = _copy(db_path, partial)
        seal_file(partial, dest)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return BackupReport(dest, dest.stat().st_size, version, counts)


def resolve_destination(dest: Path) -> Path:
    """The file a backup goes to: `dest`, or a timestamped file inside it when
    it is a directory. Raises BackupError when it exists or has no directory.
    (Shared with the PostgreSQL backup, storage.copy: one file on both backends.)"""
    if dest.is_dir():
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        dest = dest / f"picobot-{stamp}.db"
    if dest.exists():
        raise BackupError(f"{dest} already exists; choose another name or remove it")
    if not dest.parent.is_dir():
        raise BackupError(f"directory {dest.parent} does not exist")
    return dest


def seal_file(partial: Path, dest: Path) -> None:
    """Make the finished copy private and durable, then rename it into place."""
    partial.chmod(0o600)  # conversations and channel credentials live in here
    _fsync(partial)
    os.replace(partial, dest)
    _fsync_dir(dest.parent)


def _copy(db_path: Path, target: Path) -> tuple[int, dict[str, int]]:
    try:
        source = sqlite3.connect(db_path, timeout=30)
        try:
            copy = sqlite3.connect(target)
            try:
                # pages=-1: the whole database in one step, i.e. one read
                # transaction and one snapshot, however busy the writer is.
                source.backup(copy, pages=-1)
                copy.execute("PRAGMA journal_mode=DELETE")  # one self-contained file
                problems = [row[0] for row in copy.execute("PRAGMA integrity_check")]
                if problems != ["ok"]:
                    raise BackupError("the copy failed integrity_check: " + "; ".join(problems[:5]))
                version: int = copy.execute("PRAGMA user_version").fetchone()[0]
                return version, _row_counts(copy)
            finally:
                copy.close()
        finally:
            source.close()
    except sqlite3.Error as exc:
        raise BackupError(f"cannot copy {db_path}: {exc}") from exc


def _row_counts(conn: sqlite3.Connection) -> dict[str, int]:
    tables = [
        row[0]
        for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    ]
    counts: dict[str, int] = {}
    for table in tables:
        quoted = '"' + table.replace('"', '""') + '"'
        counts[table] = conn.execute(f"SELECT count(*) FROM {quoted}").fetchone()[0]
    return counts


def restore_database(
    backup: Path,
    db_path: Path,
    *,
    force: bool,
    on_forced: Callable[[], None] = lambda: None,
) -> Path | None:
    """Replace the database at `db_path` with the copy `backup`. Blocking.

    Raises DatabaseInUse while another connection holds the database, unless
    `force`; then `on_forced()` is called before the restore goes ahead.
    Returns where the previous database was kept, if there was one.
    """
    check_backup(backup)
    db_path.parent.mkdir(parents=True, exist_ok=True)
    # Whoever runs this (often root), the gateway's user must own the result.
    owner = (db_path if db_path.exists() else db_path.parent).stat()
    aside: Path | None = None
    if db_path.exists():
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        aside = db_path.with_name(f"{db_path.name}.pre-restore-{stamp}")
        try:
            _keep_aside(db_path, aside)
        except DatabaseInUse:
            if not force:
                raise
            on_forced()
            _keep_aside(db_path, aside, exclusive=False)
        _chown_like(aside, owner)
    incoming = db_path.with_name(db_path.name + ".restoring")
    shutil.copyfile(backup, incoming)
    incoming.chmod(0o600)
    _chown_like(incoming, owner)
    _fsync(incoming)
    # A stale WAL would be replayed onto the restored file and corrupt it.
    for suffix in ("-wal", "-shm", "-journal"):
        db_path.with_name(db_path.name + suffix).unlink(missing_ok=True)
    os.replace(incoming, db_path)
    _fsync_dir(db_path.parent)
    return aside


def _chown_like(path: Path, owner: os.stat_result) -> None:
    if os.geteuid() == 0 and hasattr(os, "chown"):
        os.chown(path, owner.st_uid, owner.st_gid)


def check_backup(backup: Path) -> None:
    """Raise BackupError unless `backup` is a sound SQLite file this picobot can read."""
    if not backup.is_file():
        raise BackupError(f"{backup} does not exist")
    try:
        conn = sqlite3.connect(f"{backup.resolve().as_uri()}?mode=ro", uri=True)
        try:
            result = conn.execute("PRAGMA quick_check").fetchone()[0]
            version: int = conn.execute("PRAGMA user_version").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise BackupError(f"{backup} is not a usable SQLite database: {exc}") from exc
    if result != "ok":
        raise BackupError(f"{backup} is damaged: {result}")
    if version > len(MIGRATIONS):
        raise BackupError(
            f"{backup} has schema version {version}, newer than this picobot knows "
            f"({len(MIGRATIONS)}); upgrade picobot first"
        )


def _keep_aside(db_path: Path, aside: Path, *, exclusive: bool = True) -> None:
    """Copy the current database (WAL included) to `aside` under an exclusive lock.

    In WAL mode an idle connection holds no lock that BEGIN IMMEDIATE would
    meet, but exclusive locking mode cannot be entered while any other
    connection has the database open: that is the "gateway running" test.
    A current file SQLite cannot read at all is kept aside byte for byte.
    """
    try:
        conn = sqlite3.connect(db_path, timeout=0, isolation_level=None)
        try:
            if exclusive:
                _lock_exclusively(conn, db_path)
            target = sqlite3.connect(aside)
            try:
                conn.backup(target, pages=-1)
                target.execute("PRAGMA journal_mode=DELETE")
            finally:
                target.close()
        finally:
            conn.close()
    except sqlite3.OperationalError as exc:
        raise BackupError(f"cannot read the current database {db_path}: {exc}") from exc
    except sqlite3.DatabaseError:  # damaged or not SQLite: nothing can hold it open
        aside.unlink(missing_ok=True)
        shutil.copyfile(db_path, aside)
    aside.chmod(0o600)


def _lock_exclusively(conn: sqlite3.Connection, db_path: Path) -> None:
    try:
        conn.execute("PRAGMA locking_mode=EXCLUSIVE")
        conn.execute("BEGIN EXCLUSIVE")
        conn.execute("COMMIT")  # in exclusive locking mode the lock stays held
    except sqlite3.OperationalError as exc:
        raise DatabaseInUse(
            f"{db_path} is in use ({exc}): stop the gateway first "
            "(systemctl stop picobot), or pass --force"
        ) from exc


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return  # not every platform can open a directory
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
