"""`Database`: what every storage backend is, and `open_database(url)`.

A backend runs the transaction functions of `storage/sql/` (plain sync
functions of a connection) in a thread of its own, one thread hop per
transaction:

- `read(fn)` runs `fn` outside any write transaction.
- `write(fn)` queues `fn`; one writer task drains the queue and runs every
  queued function in ONE transaction (one failing function rolls back alone,
  in its own savepoint, and raises to its own caller). Before it drains, it
  lets the tasks already woken run once, so that their writes join the
  commit. Under load (the last commit held more than one write) it also
  waits until `commit_spacing_secs` after that commit ended, so that the next
  ones join too: fewer, larger commits; a lone write never waits. The call
  returns after COMMIT: a returned write is durable.
- A write the database refuses for now (storage.errors) raises
  `StorageUnavailable` and sets `write_failure` until a commit passes again.
- A write made under a fence (storage.fence: a turn's, with several workers
  on one database) first checks in its own savepoint that the worker still
  holds the chat's lease; if not it raises `FenceLost`, alone.

Backends: `storage/sqlite/` (the default, a file) and `storage/postgres/`
(a server). `storage.url` picks one (storage.url, docs/storage.md); the
runtime never knows which. This module must never be called from a channel or the agent.
"""

from __future__ import annotations

import abc
import asyncio
import functools
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias, TypeVar

import structlog

from storage.errors import (
    DatabaseError,
    StorageClosed,
    StorageUnavailable,
    unavailable,
)
from storage.fence import guarded

__all__ = [
    "STORAGE_ERRORS",
    "Connection",
    "Database",
]

log = structlog.get_logger(__name__)
T = TypeVar("T")

# The connection a transaction function receives. Every backend hands out
# the subset of sqlite3's that storage/sql/ uses: `execute` and
# `executemany` with `?` placeholders, cursors with `fetchone`, `fetchall`,
# iteration, `rowcount` and `row_factory`, rows by index and by column name,
# `in_transaction`. Outside storage/ use this name, never sqlite3.
Connection: TypeAlias = sqlite3.Connection

# what a call raises when the database itself failed (busy, full, closed, a
# refused constraint), as opposed to what it was asked to store
STORAGE_ERRORS: Final[tuple[type[Exception], ...]] = (
    sqlite3.Error,
    DatabaseError,
    StorageClosed,
    StorageUnavailable,
)

_BATCH_MAX: Final = 512


@dataclass(slots=True)
class _Job:
    fn: Callable[[Connection], Any]
    future: asyncio.Future[Any]


class Database(abc.ABC):
    """A backend: one writer with group commits, reads beside it."""

    #: the statement that opens a write transaction
    begin: str = "BEGIN"

    def __init__(self, *, write_queue_capacity: int = 4096, commit_spacing_secs: float = 0.001):
        self._queue: asyncio.Queue[_Job | None] = asyncio.Queue(write_queue_capacity)
        self._writer: asyncio.Task[None] | None = None
        self._commit_spacing = commit_spacing_secs
        # when the last commit ended, and how many writes it held (_write_loop)
        self._last_commit_at = 0.0
        self._last_commit_jobs = 0
        self._closed = False
        self._write_failure: str | None = None
        self.schema_version = 0

    # -- what a backend provides -------------------------------------------------
    @property
    @abc.abstractmethod
    def describe(self) -> str:
        """Where the data is, for logs and messages (no password)."""

    @abc.abstractmethod
    async def open(self) -> Database:
        """Connect and migrate; raises StorageUnusable, SchemaTooNew."""

    @abc.abstractmethod
    async def read(self, fn: Callable[[Connection], T]) -> T:
        """Run `fn` outside any write transaction."""

    @abc.abstractmethod
    async def _run_writes(self, fn: Callable[[Connection], T]) -> T:
        """Run `fn` on the writer's connection, in its thread."""

    @abc.abstractmethod
    async def _close_connections(self) -> None:
        """Stop what the backend runs beside the writer and close its connections."""

    # -- lifecycle ---------------------------------------------------------
    def _start_writer(self) -> None:
        self._writer = asyncio.create_task(self._write_loop(), name="storage-writer")

    async def close(self) -> None:
        """Flush queued writes, then close. Idempotent."""
        if self._closed:
            return
        self._closed = True
        await self._stop_beside_writer()
        if self._writer is not None:
            await self._queue.put(None)
            await self._writer
        await self._close_connections()

    async def _stop_beside_writer(self) -> None:  # noqa: B027 - a hook, empty by default
        """Stop background work that writes through the writer (checkpoints)."""

    async def __aenter__(self) -> Database:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- several workers (docs/scale-out.md) -------------------------------------
    #: whether several gateways may share this database (PostgreSQL)
    shared: bool = False

    async def listen(
        self, channel: str, on_payload: Callable[[str], None], on_listening: Callable[[], None]
    ) -> None:
        """Until cancelled, each notification's payload on `channel`;
        `on_listening` after each (re)connect. Only a shared database has them."""
        raise NotImplementedError(f"{type(self).__name__} has no notifications")

    # -- writes --------------------------------------------------------------
    async def write(
        self,
        fn: Callable[[Connection], T],
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
        await self._enqueue(_Job(guarded(fn), future))
        return await asyncio.shield(future)

    async def write_each(self, fns: Sequence[Callable[[Connection], T]]) -> list[T | Exception]:
        """`write` for several functions at once, each its own job: they share
        a commit, and each result is its value or the exception that rolled
        that one back alone."""
        if self._closed:
            raise StorageClosed("storage is closed")
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[T]] = []
        for fn in fns:
            futures.append(loop.create_future())
            await self._enqueue(_Job(guarded(fn), futures[-1]))
        results = await asyncio.gather(*futures, return_exceptions=True)
        return [r if not isinstance(r, BaseException) else _as_exception(r) for r in results]

    async def _enqueue(self, job: _Job) -> None:
        try:
            self._queue.put_nowait(job)
        except asyncio.QueueFull:
            await self._queue.put(job)

    def submit(self, fn: Callable[[Connection], T]) -> asyncio.Future[T] | None:
        """Queue `fn` for the next group commit without waiting; None when the
        queue is full (then use `write`). Await the future to know it committed."""
        if self._closed:
            raise StorageClosed("storage is closed")
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        try:
            self._queue.put_nowait(_Job(guarded(fn), future))
        except asyncio.QueueFull:
            return None
        return future

    @property
    def pending_writes(self) -> int:
        return self._queue.qsize()

    @property
    def write_failure(self) -> str | None:
        """Why the last commit failed (the database's words) while writes fail;
        None once one passes."""
        return self._write_failure

    async def probe_writes(self) -> bool:
        """Whether the database takes a write now (through the writer)."""
        try:
            await self.write(self._probe)
        except (StorageUnavailable, StorageClosed):
            return False
        return True

    @staticmethod
    @abc.abstractmethod
    def _probe(conn: Connection) -> None:
        """A write that changes nothing but still needs the database to take one."""

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
                batch = functools.partial(_commit_batch, jobs=jobs, begin=self.begin)
                outcomes = await self._run_writes(batch)
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


def _commit_batch(conn: Connection, *, jobs: list[_Job], begin: str) -> list[tuple[bool, Any]]:
    """Run every job in one transaction. Jobs nearly always succeed, so they
    first run back to back; if one raises, that attempt is rolled back and the
    batch runs again with each job in its own SAVEPOINT, so that only the
    failing one is lost (job functions touch nothing but the connection, so
    running one twice is safe). A job that failed on the database itself (a
    full disk: storage.errors) fails the whole batch instead: the next job
    would meet the same, and the database may have rolled the transaction back."""
    try:
        return _run_jobs(conn, jobs, isolated=False, begin=begin)
    except _JobFailed as failed:
        if failed.__cause__ is not None and unavailable(failed.__cause__) is not None:
            raise failed.__cause__ from None
        return _run_jobs(conn, jobs, isolated=True, begin=begin)


class _JobFailed(Exception):
    pass


def _run_jobs(
    conn: Connection, jobs: list[_Job], *, isolated: bool, begin: str
) -> list[tuple[bool, Any]]:
    outcomes: list[tuple[bool, Any]] = []
    conn.execute(begin)
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
                conn.execute("ROLLBACK TO SAVEPOINT job")
                conn.execute("RELEASE SAVEPOINT job")
                outcomes.append((False, exc))
            else:
                conn.execute("RELEASE SAVEPOINT job")
                outcomes.append((True, value))
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return outcomes
