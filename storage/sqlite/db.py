"""The SQLite backend: connection, pragmas, versioned migrations, checkpoints.

One aiosqlite connection owns one worker thread; reads and the writer's
group commits (storage.database) run there, a whole transaction per thread
hop.

- Checkpoints (WAL → database file, with fsyncs) run every second on a
  second connection in another thread, not in front of a commit; only when
  the WAL outgrows `wal_restart_frames` (sustained load: see
  `_checkpoint_loop`) does the writer's connection checkpoint once itself.
- A write the database refuses for now (busy past the busy timeout, disk
  full, an I/O error, a read-only file: storage.errors) raises
  `StorageUnavailable` and sets `write_failure` until a commit passes again;
  while it is set, the checkpointer probes with an empty write every round,
  so it clears by itself once writes pass, even on an idle gateway.

This module must never be called from a channel or the agent (DESIGN §3).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Final, TypeVar

import aiosqlite
import structlog

from storage.database import STORAGE_ERRORS, Connection
from storage.database import Database as BaseDatabase
from storage.errors import SchemaTooNew, StorageClosed, StorageUnavailable, StorageUnusable
from storage.sqlite.migrations import MIGRATIONS

__all__ = [
    "STORAGE_ERRORS",
    "Connection",
    "Database",
    "SchemaTooNew",
    "SqliteDatabase",
    "StorageClosed",
    "StorageUnavailable",
    "StorageUnusable",
]

log = structlog.get_logger(__name__)
T = TypeVar("T")

_SCHEMA_LATEST: Final = len(MIGRATIONS)


def _null(_value: None) -> None:
    return None


# Python's sqlite3 (3.11) binds a str, int or float as it is, but looks a
# None up as an object to adapt, and the lookup fails on an AttributeError
# raised and cleared inside the module: about 0.2 us for every NULL bound (an
# insert of six NULLs and two values, 3.0 -> 1.8 us), and a turn's rows bind
# some twenty (a message row's tool_calls, name, media ...). With an adapter
# registered for None, the lookup finds it at once and it binds NULL as
# before. Process-wide, like every sqlite3 adapter.
sqlite3.register_adapter(type(None), _null)


class SqliteDatabase(BaseDatabase):
    begin = "BEGIN IMMEDIATE"

    def __init__(
        self,
        path: Path | str,
        *,
        write_queue_capacity: int = 4096,
        checkpoint_interval_secs: float = 1.0,
        wal_restart_frames: int = 1000,
        commit_spacing_secs: float = 0.001,
    ) -> None:
        super().__init__(
            write_queue_capacity=write_queue_capacity, commit_spacing_secs=commit_spacing_secs
        )
        self.path = Path(path)
        self._conn: aiosqlite.Connection | None = None
        self._checkpointer: asyncio.Task[None] | None = None
        self._checkpoint_interval = checkpoint_interval_secs
        self._wal_restart_frames = wal_restart_frames
        self._stop_checkpoints = asyncio.Event()
        self.checkpoints = 0

    @property
    def describe(self) -> str:
        return str(self.path)

    # -- lifecycle ---------------------------------------------------------
    async def open(self) -> SqliteDatabase:
        """Raises StorageUnusable when the file cannot be opened and migrated
        (a folder that cannot be made, an unwritable file), SchemaTooNew."""
        if self._conn is not None or self._closed:
            raise RuntimeError("Database.open() called twice")
        try:
            if str(self.path) != ":memory:":
                await asyncio.to_thread(self.path.parent.mkdir, parents=True, exist_ok=True)
            conn = await aiosqlite.connect(self.path, isolation_level=None, check_same_thread=False)
        except (OSError, sqlite3.Error) as exc:
            raise _unusable(self.path, exc) from exc
        self._conn = conn
        try:
            self.schema_version = await self._run(_prepare)
        except (OSError, sqlite3.Error) as exc:
            await conn.close()
            self._conn = None
            raise _unusable(self.path, exc) from exc
        except BaseException:
            await conn.close()
            self._conn = None
            raise
        self._start_writer()
        if str(self.path) != ":memory:":
            self._checkpointer = asyncio.create_task(
                self._checkpoint_loop(), name="storage-checkpointer"
            )
        return self

    async def _stop_beside_writer(self) -> None:
        if self._checkpointer is not None:
            self._stop_checkpoints.set()
            await self._checkpointer

    async def _close_connections(self) -> None:
        if self._conn is not None:
            await self._conn.close()
            self._conn = None

    async def __aenter__(self) -> SqliteDatabase:
        return await self.open()

    # -- access --------------------------------------------------------------
    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await self._run(fn)

    async def _run_writes(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await self._run(fn)

    @staticmethod
    def _probe(conn: sqlite3.Connection) -> None:
        _rewrite_a_page(conn)

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        conn = self._conn
        if conn is None:
            raise StorageClosed("storage is not open")
        # aiosqlite's public API costs a thread hop per statement; `_execute`
        # runs one function on its worker thread, which is what a whole
        # transaction needs. Pinned to aiosqlite < 0.23 in pyproject.toml.
        raw: sqlite3.Connection = conn._conn
        result: T = await conn._execute(fn, raw)  # type: ignore[no-untyped-call]
        return result

    async def _checkpoint_loop(self) -> None:
        """Copy the WAL into the database file from a second connection on
        another thread, so the writer waits for a checkpoint's fsyncs only
        under sustained load, about once a second (its own automatic
        checkpoints are off; see `_prepare`)."""
        try:
            conn = await asyncio.to_thread(_checkpoint_connection, self.path)
        except sqlite3.Error as exc:  # then the writer checkpoints after all
            log.error("storage_checkpointer_unavailable", error=str(exc))
            await self._run(_automatic_checkpoints)
            return
        try:
            while not self._closed:
                try:  # close() sets _closed and wakes us; never cancelled mid-checkpoint
                    async with asyncio.timeout(self._checkpoint_interval):
                        await self._stop_checkpoints.wait()
                except TimeoutError:
                    pass
                try:
                    frames = await asyncio.to_thread(_checkpoint, conn)
                    if frames > self._wal_restart_frames:
                        # The WAL starts over only at a write that begins after
                        # a checkpoint copied every frame; under sustained load
                        # a write is always open while one runs, and the WAL
                        # grows by every commit for as long as the load lasts.
                        # So the writer's own connection checkpoints once, between
                        # two commits: the frames since, and an fsync.
                        await self._run(_checkpoint)
                    self.checkpoints += 1
                except sqlite3.Error as exc:  # e.g. busy: the next round catches up
                    log.warning("storage_checkpoint_failed", error=str(exc))
                if self._write_failure is not None and not self._closed:
                    await self.probe_writes()  # clears it once writes pass (/ready)
        finally:
            await asyncio.to_thread(conn.close)


# the name the tests and tools know the SQLite backend by
Database = SqliteDatabase


def _rewrite_a_page(conn: sqlite3.Connection) -> None:
    """Set the schema version to itself: page 1 goes to the WAL, so a disk
    that cannot take a page fails this too (a commit of nothing writes nothing)."""
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    conn.execute(f"PRAGMA user_version={version}")


def _unusable(path: Path, exc: OSError | sqlite3.Error) -> StorageUnusable:
    """One line for the operator: which file, and why, in the OS's or SQLite's words."""
    if isinstance(exc, FileExistsError | NotADirectoryError):
        reason = f"{exc.filename or path.parent} is not a directory"
    elif isinstance(exc, OSError):
        reason = f"{exc.strerror or exc}: {exc.filename or path.parent}"
    else:
        reason = str(exc)
    return StorageUnusable(f"cannot open the database {path}: {reason}")


def _checkpoint_connection(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout=5000")
    return conn


def _automatic_checkpoints(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA wal_autocheckpoint=1000")  # SQLite's default


def _checkpoint(conn: sqlite3.Connection) -> int:
    """Copy what it can of the WAL without waiting for anyone; return how
    many frames the WAL holds."""
    frames: int = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1]
    return frames


def _prepare(conn: sqlite3.Connection) -> int:
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    # checkpoints run on their own connection (Database._checkpoint_loop); an
    # automatic one would stall every commit queued behind it for its fsyncs
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA busy_timeout=5000")
    current: int = conn.execute("PRAGMA user_version").fetchone()[0]
    latest = len(MIGRATIONS)
    if current > latest:
        raise SchemaTooNew(
            f"database schema version {current} is newer than this picobot understands "
            f"({latest}); upgrade picobot or restore a backup"
        )
    for version in range(current + 1, latest + 1):
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in _statements(MIGRATIONS[version - 1]):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version={version}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        log.info("storage_migrated", version=version)
    return latest


def _statements(script: str) -> list[str]:
    """Split a migration script into statements (no semicolons inside literals)."""
    return [s.strip() for s in script.split(";") if s.strip()]
