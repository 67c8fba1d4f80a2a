"""Moving a home between backends: `copy_storage`, and the PostgreSQL backup.

`copy_storage(source_url, target_url)` copies every picobot table from one
database to another (SQLite or PostgreSQL on either side). Both are opened
with `open_database` first, so both schemas are at this picobot's latest
version (a source newer than that raises SchemaTooNew, as at start-up).
Then, on plain connections of its own in one thread (a bulk copy needs no
group commit, and must not hold up the event loop):

- the source is read in ONE snapshot (SQLite: one read transaction;
  PostgreSQL: REPEATABLE READ READ ONLY), streamed in batches, so memory
  stays bounded however large a table is;
- the target is written in ONE transaction, parents before children (the
  foreign keys, read from the target's schema), with explicit column lists;
  a target with any row in a picobot table is refused before anything is
  written (unless `replace`, which empties it in the same transaction: the
  forced restore);
- on PostgreSQL each identity sequence is moved past the copied ids;
- every table's count on the target must equal the source's snapshot
  before the COMMIT, else nothing is kept.

Writes made to the source after its snapshot are not carried over: stop the
gateway first (docs/storage.md). URLs are shown through `redact_url` only.

`backup_postgres` / `restore_postgres`: `picobot backup` and `restore` on
PostgreSQL, so that a backup is one portable SQLite file on both backends.
"""

from __future__ import annotations

import asyncio
import graphlib
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

import psycopg

from storage.backends import open_database
from storage.sqlite.backup import (
    BackupError,
    BackupReport,
    check_backup,
    resolve_destination,
    seal_file,
)
from storage.url import is_postgres_url, redact_url, sqlite_path_of

__all__ = [
    "CopyError",
    "CopyReport",
    "TargetNotEmpty",
    "backup_postgres",
    "copy_storage",
    "restore_postgres",
]

BATCH_ROWS: Final = 1000
_SCHEMA_TABLE: Final = "picobot_schema"  # storage.postgres.migrations.SCHEMA_TABLE


class CopyError(Exception):
    """The copy was refused or failed; nothing was written. The message says why."""


class TargetNotEmpty(CopyError):
    pass


@dataclass(frozen=True, slots=True)
class CopyReport:
    source: str  # described: a path, or a URL without its password
    target: str
    counts: dict[str, int]  # table -> rows, in the order they were copied

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def describe(url: str) -> str:
    """`url` as it may be shown: a SQLite file's path, a PostgreSQL URL without password."""
    return redact_url(url) if is_postgres_url(url) else sqlite_path_of(url)


async def copy_storage(
    source_url: str, target_url: str, *, replace: bool = False, batch_rows: int = BATCH_ROWS
) -> CopyReport:
    """Copy every table of `source_url` into `target_url` (see the module
    docstring). Raises CopyError (refused or failed: the target is left as it
    was), SchemaTooNew, StorageUnusable."""
    if describe(source_url) == describe(target_url):
        raise CopyError("the source and the target are the same database")
    if not is_postgres_url(source_url) and not await asyncio.to_thread(
        Path(sqlite_path_of(source_url)).is_file
    ):
        raise CopyError(f"the source database {describe(source_url)} does not exist")
    for url in (source_url, target_url):
        await _migrate(url)
    return await asyncio.to_thread(_copy, source_url, target_url, replace, batch_rows)


async def _migrate(url: str) -> None:
    """Open and close `url` with its backend: that brings its schema to the latest."""
    db = open_database(url)
    await db.open()
    await db.close()


# -- the copy, in a thread -----------------------------------------------------------


def _copy(source_url: str, target_url: str, replace: bool, batch_rows: int) -> CopyReport:
    source = _side(source_url)
    try:
        target = _side(target_url)
        try:
            counts = _copy_between(source, target, replace=replace, batch_rows=batch_rows)
        except (sqlite3.Error, psycopg.Error) as exc:
            raise CopyError(f"the copy failed, nothing was written: {_first_line(exc)}") from exc
        finally:
            target.close()
    finally:
        source.close()
    return CopyReport(source.describe, target.describe, counts)


def _copy_between(
    source: _Side, target: _Side, *, replace: bool, batch_rows: int
) -> dict[str, int]:
    source.begin_snapshot()
    target.begin_write()
    try:
        tables = _copy_order(source, target)
        if replace:
            target.empty(tables)
        else:
            _refuse_non_empty(target, tables)
        counts: dict[str, int] = {}
        for table in tables:
            counts[table] = _copy_table(source, target, table, batch_rows)
        target.after_copy(tables)
        _verify(target, counts)
        target.commit()
    except BaseException:
        target.rollback()
        raise
    finally:
        source.rollback()  # ends the read snapshot
    return counts


def _copy_order(source: _Side, target: _Side) -> list[str]:
    """The target's tables, parents before children; the source must have the same."""
    tables = set(target.tables())
    theirs = set(source.tables())
    if tables != theirs:
        missing = ", ".join(sorted(tables ^ theirs))
        raise CopyError(
            f"the two databases do not have the same tables (differ in: {missing}); "
            "are both picobot databases at the same version?"
        )
    sorter: graphlib.TopologicalSorter[str] = graphlib.TopologicalSorter()
    for table in sorted(tables):
        sorter.add(table)
    for child, parent in sorted(target.foreign_keys()):
        if child != parent and child in tables and parent in tables:
            sorter.add(child, parent)
    return list(sorter.static_order())


def _refuse_non_empty(target: _Side, tables: Sequence[str]) -> None:
    for table in tables:
        if target.has_rows(table):
            raise TargetNotEmpty(
                f"the target {target.describe} is not empty (table {table} has rows); "
                "copy only into a new, empty database"
            )


def _copy_table(source: _Side, target: _Side, table: str, batch_rows: int) -> int:
    """Stream `table` over in batches; the number of rows copied."""
    theirs = source.columns(table)
    ours = target.columns(table)
    lost = [c for c in theirs if c not in ours]
    if lost:
        raise CopyError(f"table {table}: the target has no column {', '.join(lost)}")
    copied = 0
    try:
        for batch in source.rows(table, theirs, batch_rows):
            target.insert(table, theirs, batch)
            copied += len(batch)
    except (sqlite3.Error, psycopg.Error) as exc:
        raise CopyError(f"copying table {table} failed: {_first_line(exc)}") from exc
    return copied


def _verify(target: _Side, counts: dict[str, int]) -> None:
    for table, expected in counts.items():
        found = target.count(table)
        if found != expected:
            raise CopyError(
                f"table {table}: {found} rows on the target, {expected} in the source; "
                "nothing was copied"
            )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# -- the two backends' plain connections ---------------------------------------------


class _Side(Protocol):
    describe: str

    def begin_snapshot(self) -> None: ...
    def begin_write(self) -> None: ...
    def commit(self) -> None: ...
    def rollback(self) -> None: ...
    def close(self) -> None: ...
    def tables(self) -> list[str]: ...
    def columns(self, table: str) -> list[str]: ...
    def foreign_keys(self) -> list[tuple[str, str]]: ...
    def has_rows(self, table: str) -> bool: ...
    def count(self, table: str) -> int: ...
    def rows(self, table: str, columns: Sequence[str], size: int) -> Iterator[list[Any]]: ...
    def insert(self, table: str, columns: Sequence[str], rows: Sequence[Any]) -> None: ...
    def empty(self, tables: Sequence[str]) -> None: ...
    def after_copy(self, tables: Sequence[str]) -> None: ...


def _side(url: str) -> _Side:
    if is_postgres_url(url):
        return _PostgresSide(url)
    return _SqliteSide(Path(sqlite_path_of(url)))


class _SqliteSide:
    def __init__(self, path: Path) -> None:
        self.describe = str(path)
        try:
            self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self._conn.execute("PRAGMA foreign_keys=ON")
            self._conn.execute("PRAGMA busy_timeout=5000")
        except sqlite3.Error as exc:
            raise CopyError(f"cannot open {path}: {exc}") from exc

    def begin_snapshot(self) -> None:
        # deferred: the snapshot is taken at the first read, and held to the end
        self._conn.execute("BEGIN")

    def begin_write(self) -> None:
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise CopyError(f"{self.describe} is in use ({exc}); stop the gateway first") from exc

    def commit(self) -> None:
        self._conn.execute("COMMIT")

    def rollback(self) -> None:
        if self._conn.in_transaction:
            self._conn.execute("ROLLBACK")

    def close(self) -> None:
        self._conn.close()

    def tables(self) -> list[str]:
        sql = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        return [row[0] for row in self._conn.execute(sql)]

    def columns(self, table: str) -> list[str]:
        return [row[1] for row in self._conn.execute(f"PRAGMA table_info({_quoted(table)})")]

    def foreign_keys(self) -> list[tuple[str, str]]:
        return [
            (table, row[2])
            for table in self.tables()
            for row in self._conn.execute(f"PRAGMA foreign_key_list({_quoted(table)})")
        ]

    def has_rows(self, table: str) -> bool:
        return self._conn.execute(f"SELECT 1 FROM {_quoted(table)} LIMIT 1").fetchone() is not None

    def count(self, table: str) -> int:
        return int(self._conn.execute(f"SELECT count(*) FROM {_quoted(table)}").fetchone()[0])

    def rows(self, table: str, columns: Sequence[str], size: int) -> Iterator[list[Any]]:
        cursor = self._conn.execute(f"SELECT {_column_list(columns)} FROM {_quoted(table)}")
        while batch := cursor.fetchmany(size):
            yield batch

    def insert(self, table: str, columns: Sequence[str], rows: Sequence[Any]) -> None:
        marks = ", ".join("?" for _ in columns)
        self._conn.executemany(
            f"INSERT INTO {_quoted(table)} ({_column_list(columns)}) VALUES ({marks})", rows
        )

    def empty(self, tables: Sequence[str]) -> None:
        for table in reversed(tables):  # children first
            self._conn.execute(f"DELETE FROM {_quoted(table)}")

    def after_copy(self, tables: Sequence[str]) -> None:
        """Nothing: an INTEGER PRIMARY KEY continues from max(rowid) by itself."""


class _PostgresSide:
    def __init__(self, url: str) -> None:
        from storage.postgres.db import connect  # psycopg's connect, autocommit

        self.describe = redact_url(url)
        try:
            self._conn = connect(url)
        except psycopg.Error as exc:
            raise CopyError(f"cannot connect to {self.describe}: {_first_line(exc)}") from exc
        self._cursors = 0

    def _all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._conn.execute(sql, params).fetchall()

    def begin_snapshot(self) -> None:
        self._conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")

    def begin_write(self) -> None:
        self._conn.execute("BEGIN")

    def commit(self) -> None:
        self._conn.execute("COMMIT")

    def rollback(self) -> None:
        if self._conn.closed or self._conn.broken:
            return
        if self._conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            self._conn.execute("ROLLBACK")

    def close(self) -> None:
        self._conn.close()

    def tables(self) -> list[str]:
        rows = self._all(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' "
            "AND table_name <> %s",
            (_SCHEMA_TABLE,),
        )
        return [row[0] for row in rows]

    def columns(self, table: str) -> list[str]:
        rows = self._all(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = %s ORDER BY ordinal_position",
            (table,),
        )
        return [row[0] for row in rows]

    def foreign_keys(self) -> list[tuple[str, str]]:
        rows = self._all(
            "SELECT child.relname, parent.relname FROM pg_constraint c "
            "JOIN pg_class child ON child.oid = c.conrelid "
            "JOIN pg_class parent ON parent.oid = c.confrelid "
            "WHERE c.contype = 'f' AND c.connamespace = "
            "(SELECT oid FROM pg_namespace WHERE nspname = current_schema())"
        )
        return [(row[0], row[1]) for row in rows]

    def has_rows(self, table: str) -> bool:
        return bool(self._all(f"SELECT 1 FROM {_quoted(table)} LIMIT 1"))

    def count(self, table: str) -> int:
        return int(self._all(f"SELECT count(*) FROM {_quoted(table)}")[0][0])

    def rows(self, table: str, columns: Sequence[str], size: int) -> Iterator[list[Any]]:
        # a server-side cursor: the rows come over `size` at a time, not the table at once
        self._cursors += 1
        with self._conn.cursor(name=f"picobot_copy_{self._cursors}") as cursor:
            cursor.execute(f"SELECT {_column_list(columns)} FROM {_quoted(table)}")
            while batch := cursor.fetchmany(size):
                yield batch

    def insert(self, table: str, columns: Sequence[str], rows: Sequence[Any]) -> None:
        marks = ", ".join("%s" for _ in columns)
        with self._conn.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO {_quoted(table)} ({_column_list(columns)}) VALUES ({marks})", rows
            )

    def empty(self, tables: Sequence[str]) -> None:
        if tables:
            names = ", ".join(_quoted(t) for t in tables)
            self._conn.execute(f"TRUNCATE {names} RESTART IDENTITY CASCADE")

    def after_copy(self, tables: Sequence[str]) -> None:
        """Move each identity past the ids copied in, so the next insert gets a new one."""
        rows = self._all(
            "SELECT table_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND column_name = 'id' "
            "AND is_identity = 'YES'"
        )
        for (table,) in rows:
            if table in tables:
                self._conn.execute(
                    "SELECT setval(pg_get_serial_sequence(%s, 'id'), max(id)) "
                    f"FROM {_quoted(table)} HAVING max(id) IS NOT NULL",
                    (_quoted(table),),
                )


def _column_list(columns: Sequence[str]) -> str:
    return ", ".join(_quoted(c) for c in columns)


# -- backup and restore on PostgreSQL ------------------------------------------------


async def backup_postgres(url: str, dest: Path) -> BackupReport:
    """A consistent snapshot of the PostgreSQL database `url` in a new SQLite
    file at `dest` (or a timestamped file inside it, as on SQLite). Raises
    BackupError, CopyError, StorageUnusable."""
    dest = await asyncio.to_thread(resolve_destination, dest)
    partial = dest.with_name(dest.name + ".partial")
    await asyncio.to_thread(_remove_sqlite_file, partial)
    try:
        report = await copy_storage(url, f"sqlite:///{partial}")
        version = await asyncio.to_thread(_finish_backup, partial, dest)
    except BaseException:
        await asyncio.to_thread(_remove_sqlite_file, partial)
        raise
    size = (await asyncio.to_thread(dest.stat)).st_size
    return BackupReport(dest, size, version, dict(report.counts))


def _finish_backup(partial: Path, dest: Path) -> int:
    """One self-contained, checked file (no WAL beside it), renamed into place."""
    conn = sqlite3.connect(partial, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=DELETE")
        problems = [row[0] for row in conn.execute("PRAGMA integrity_check")]
        if problems != ["ok"]:
            raise BackupError("the copy failed integrity_check: " + "; ".join(problems[:5]))
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    finally:
        conn.close()
    seal_file(partial, dest)
    return version


def _remove_sqlite_file(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)


async def restore_postgres(backup: Path, url: str, *, force: bool) -> CopyReport:
    """Copy the SQLite backup `backup` into the PostgreSQL database `url`.
    Refused (CopyError) when that database has rows, unless `force`: then
    every picobot table is emptied first, in the same transaction as the
    copy. The backup file itself is never written to (a scratch copy of it
    is brought to the latest schema). Raises BackupError, CopyError."""
    await asyncio.to_thread(check_backup, backup)
    scratch_dir = await asyncio.to_thread(tempfile.mkdtemp, prefix="picobot-restore-")
    try:
        scratch = Path(scratch_dir) / "backup.db"
        await asyncio.to_thread(shutil.copyfile, backup, scratch)
        return await copy_storage(f"sqlite:///{scratch}", url, replace=force)
    except TargetNotEmpty as exc:
        raise TargetNotEmpty(f"{exc}; pass --force to replace its contents") from exc
    finally:
        await asyncio.to_thread(shutil.rmtree, scratch_dir, True)
