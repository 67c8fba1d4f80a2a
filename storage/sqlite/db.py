"""The SQLite database: connection, pragmas, versioned migrations, group commits.

One aiosqlite connection owns one worker thread. Every storage function is a
plain synchronous function of a `sqlite3.Connection` that runs on that thread,
so a whole transaction costs one thread hop instead of one per statement:

- `Database.read(fn)` runs `fn` outside any write transaction.
- `Database.write(fn)` queues `fn`; a writer task drains the queue and runs
  every queued function in ONE transaction (one failing function rolls back
  alone and raises to its own caller). Before it drains, it lets the tasks
  already woken run once, so that their writes join the commit. Under load
  (the last commit held more than one write) it also waits until
  `commit_spacing_secs` after that commit ended, so that the next ones join
  too: fewer, larger commits; a lone write never waits. The call returns
  after COMMIT: a returned write is durable.
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
import functools
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeAlias, TypeVar

import aiosqlite
import structlog

from storage.errors import StorageUnavailable, StorageUnusable, unavailable
from storage.sqlite.migrations import MIGRATIONS

__all__ = [
    "STORAGE_ERRORS",
    "Connection",
    "Database",
    "SchemaTooNew",
    "StorageClosed",
    "StorageUnavailable",
    "StorageUnusable",
]

log = structlog.get_logger(__name__)
T = TypeVar("T")

# the connection a transaction function receives; outside storage/ use this, never import sqlite3
Connection: TypeAlias = sqlite3.Connection

_BATCH_MAX: Final = 512


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


class SchemaTooNew(Exception):
    """The database was written by a newer picobot; refuse to touch it."""


class StorageClosed(Exception):
    pass


# what a write raises when the database itself failed (busy, full, closed, a
# refused constraint), as opposed to what it was asked to store
STORAGE_ERRORS: Final[tuple[type[Exception], ...]] = (
    sqlite3.Error,
    StorageClosed,
    StorageUnavailable,
)


@dataclass(slots=True)
class _Job:
    fn: Callable[[sqlite3.Connection], Any]
    future: asyncio.Future[Any]


class Database:
    def __init__(
        self,
        path: Path | str,
        *,
        write_queue_capacity: int = 4096,
        checkpoint_interval_secs: float = 1.0,
        wal_restart_frames: int = 1000,
        commit_spacing_secs: float = 0.001,
    ) -> None:
        self.path = Path(path)
        self._conn: aiosqlite.Connection | None = None
        self._queue: asyncio.Queue[_Job | None] = asyncio.Queue(write_queue_capacity)
        self._writer: asyncio.Task[None] | None = None
        self._checkpointer: asyncio.Task[None] | None = None
        self._checkpoint_interval = checkpoint_interval_secs
        self._wal_restart_frames = wal_restart_frames
        self._commit_spacing = commit_spacing_secs
        # when the last commit ended, and how many writes it held (_write_loop)
        self._last_commit_at = 0.0
        self._last_commit_jobs = 0
        self._stop_checkpoints = asyncio.Event()
        self._closed = False
        self._write_failure: str | None = None
        self.schema_version = 0
        self.checkpoints = 0

    # -- lifecycle ---------------------------------------------------------
    async def open(self) -> Database:
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
        self._writer = asyncio.create_task(self._write_loop(), name="storage-writer")
        if str(self.path) != ":memory:":
            self._checkpointer = asyncio.create_task(
                self._checkpoint_loop(), name="storage-checkpointer"
            )
        return self

    async def close(self) -> None:
        """Flush queued writes, then close. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._checkpointer is not None:
            self._stop_checkpoints.set()
            await self._checkpointer
        if self._writer is not None:
            await self._queue.put(None)
            await self._writer
        if self._conn is not None:
            await self._conn.close()
            self._conn = None

    async def __aenter__(self) -> Database:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- access --------------------------------------------------------------
    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await self._run(fn)

    async def write(
        self,
        fn: Callable[[sqlite3.Connection], T],
        *,
        on_commit: Callable[[T], None] | None = None,
    ) -> T:
        """Run `fn` inside a group-committed transaction; returns once committed.
        Once queued (at once, unless the queue is full) the write happens even
        if the caller is cancelled while it waits, and so does `on_commit`,
        called with the result right after the commit."""
        if self._closed:
            raise StorageClosed("storage is closed")
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        if on_commit is not None:
            future.add_done_callback(functools.partial(_after_commit, on_commit))
        await self._enqueue(_Job(fn, future))
        return await asyncio.shield(future)

    async def write_each(
        self, fns: Sequence[Callable[[sqlite3.Connection], T]]
    ) -> list[T | Exception]:
        """`write` for several functions at once, each its own job: they share
        a commit, and each result is its value or the exception that rolled
        that one back alone."""
        if self._closed:
            raise StorageClosed("storage is closed")
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[T]] = []
        for fn in fns:
            futures.append(loop.create_future())
            await self._enqueue(_Job(fn, futures[-1]))
        results = await asyncio.gather(*futures, return_exceptions=True)
        return [r if not isinstance(r, BaseException) else _as_exception(r) for r in results]

    async def _enqueue(self, job: _Job) -> None:
        try:
            self._queue.put_nowait(job)
        except asyncio.QueueFull:
            await self._queue.put(job)

    def submit(self, fn: Callable[[sqlite3.Connection], T]) -> asyncio.Future[T] | None:
        """Queue `fn` for the next group commit without waiting; None when the
        queue is full (then use `write`). Await the future to know it committed."""
        if self._closed:
            raise StorageClosed("storage is closed")
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        try:
            self._queue.put_nowait(_Job(fn, future))
        except asyncio.QueueFull:
            return None
        return future

    @property
    def pending_writes(self) -> int:
        return self._queue.qsize()

    @property
    def write_failure(self) -> str | None:
        """Why the last commit failed (SQLite's words) while writes fail; None once one passes."""
        return self._write_failure

    async def probe_writes(self) -> bool:
        """Whether the database takes a write now: one that changes nothing
        through the writer (it takes the write lock and writes a page)."""
        try:
            await self.write(_rewrite_a_page)
        except (StorageUnavailable, StorageClosed):
            return False
        return True

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

    def _gathering_secs(self) -> float:
        """How long the writer lets writes gather before it commits. At least
        one round (0), for the tasks already woken. Under load, until
        `commit_spacing_secs` after the last commit: at 8 clients on the real
        path that takes the commits per message from 1.4 to 0.65, and with
        them the thread hops and GIL hand-offs each one costs, for at most
        that much more latency per write. A write after a commit of one (a
        single chat, an idle gateway) is never held back."""
        if self._last_commit_jobs < 2:
            return 0.0
        wait = self._last_commit_at + self._commit_spacing - asyncio.get_running_loop().time()
        return max(wait, 0.0)

    async def _write_loop(self) -> None:
        stopping = False
        while not stopping:
            first = await self._queue.get()
            if first is None:
                break
            jobs = [first]
            await asyncio.sleep(self._gathering_secs())
            while len(jobs) < _BATCH_MAX and not self._queue.empty():
                job = self._queue.get_nowait()
                if job is None:
                    stopping = True
                    break
                jobs.append(job)
            try:
                outcomes = await self._run(functools.partial(_commit_batch, jobs=jobs))
            except Exception as exc:  # the COMMIT itself failed: nothing is durable
                failure = unavailable(exc)
                if failure is None:
                    log.exception("storage_commit_failed", batch=len(jobs))
                else:  # expected while it lasts: no traceback, /ready says it
                    log.error("storage_commit_failed", batch=len(jobs), reason=failure.reason)
                    self._set_write_failure(failure.reason)
                for job in jobs:
                    if not job.future.done():
                        job.future.set_exception(failure or exc)
                continue
            self._last_commit_at = asyncio.get_running_loop().time()
            self._last_commit_jobs = len(jobs)
            self._set_write_failure(None)
            for job, (ok, value) in zip(jobs, outcomes, strict=True):
                if job.future.done():
                    continue  # the caller was cancelled; the write still happened
                if ok:
                    job.future.set_result(value)
                else:
                    job.future.set_exception(value)

    def _set_write_failure(self, reason: str | None) -> None:
        if reason is None and self._write_failure is not None:
            log.warning("storage_writes_recovered", was=self._write_failure)
        self._write_failure = reason


def _as_exception(exc: BaseException) -> Exception:
    if isinstance(exc, Exception):
        return exc
    raise exc  # cancellation and the like are not a job's result


def _after_commit(callback: Callable[[T], None], future: asyncio.Future[T]) -> None:
    if not future.cancelled() and future.exception() is None:
        try:
            callback(future.result())
        except Exception:
            log.exception("storage_on_commit_failed")


def _commit_batch(conn: sqlite3.Connection, *, jobs: list[_Job]) -> list[tuple[bool, Any]]:
    """Run every job in one transaction. Jobs nearly always succeed, so they
    first run back to back; if one raises, that attempt is rolled back and the
    batch runs again with each job in its own SAVEPOINT, so that only the
    failing one is lost (job functions touch nothing but the connection, so
    running one twice is safe). A job that failed on the database itself (a
    full disk: storage.errors) fails the whole batch instead: the next job
    would meet the same, and SQLite may have rolled the transaction back."""
    try:
        return _run_jobs(conn, jobs, isolated=False)
    except _JobFailed as failed:
        if failed.__cause__ is not None and unavailable(failed.__cause__) is not None:
            raise failed.__cause__ from None
        return _run_jobs(conn, jobs, isolated=True)


class _JobFailed(Exception):
    pass


def _run_jobs(
    conn: sqlite3.Connection, jobs: list[_Job], *, isolated: bool
) -> list[tuple[bool, Any]]:
    outcomes: list[tuple[bool, Any]] = []
    conn.execute("BEGIN IMMEDIATE")
    try:
        for job in jobs:
            if not isolated:
                try:
                    outcomes.append((True, job.fn(conn)))
                except Exception as exc:
                    raise _JobFailed from exc
                continue
            conn.execute("SAVEPOINT job")
            try:
                value = job.fn(conn)
            except Exception as exc:
                if not conn.in_transaction or unavailable(exc) is not None:
                    raise  # the database failed, not the job (see _commit_batch)
                conn.execute("ROLLBACK TO job")
                conn.execute("RELEASE job")
                outcomes.append((False, exc))
            else:
                conn.execute("RELEASE job")
                outcomes.append((True, value))
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return outcomes


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
