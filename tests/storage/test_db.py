"""The storage core: group commits, per-job isolation, schema versions."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from storage.sqlite.db import Database, SchemaTooNew, StorageClosed
from storage.sqlite.migrations import MIGRATIONS
from tests.storage.conftest import OpenStorage


def _insert(conn: sqlite3.Connection, key: str) -> None:
    conn.execute(
        "INSERT INTO channel_state (channel, key, value, updated_at) VALUES ('t', ?, 'v', 'now')",
        (key,),
    )


def _keys(conn: sqlite3.Connection) -> list[str]:
    return [r[0] for r in conn.execute("SELECT key FROM channel_state ORDER BY key")]


async def test_concurrent_writes_share_commits_and_a_failure_stays_alone(
    open_storage: OpenStorage,
) -> None:
    async with open_storage() as db:

        def failing(conn: sqlite3.Connection) -> None:
            _insert(conn, "half-done")
            raise ValueError("boom")

        results = await asyncio.gather(
            *(db.write(lambda c, k=f"k{i}": _insert(c, k)) for i in range(50)),
            db.write(failing),
            return_exceptions=True,
        )
        assert isinstance(results[-1], ValueError)
        assert all(r is None for r in results[:-1])
        keys = await db.read(_keys)
    assert keys == sorted(f"k{i}" for i in range(50))  # "half-done" was rolled back alone


async def test_a_write_queued_one_round_later_shares_the_commit(tmp_path: Path) -> None:
    """The writer takes its first job, then lets the tasks already woken run
    before it commits: at 8 clients the next turn's write is one of them."""
    async with Database(tmp_path / "db.sqlite") as db:
        statements: list[str] = []
        await db.read(lambda c: c.set_trace_callback(statements.append))
        first = db.submit(lambda c: _insert(c, "first"))  # schedules the writer's wake-up
        later: list[asyncio.Future[None] | None] = []
        # runs in the writer's round, after it: where the next turn's write comes from
        asyncio.get_running_loop().call_soon(
            lambda: later.append(db.submit(lambda c: _insert(c, "second")))
        )
        assert first is not None
        await first
        second = later[0]
        assert second is not None
        await second
        await db.read(lambda c: c.set_trace_callback(None))
        assert sorted(await db.read(_keys)) == ["first", "second"]
    assert statements.count("COMMIT") == 1, statements


async def test_under_load_the_next_writes_gather_until_the_spacing(tmp_path: Path) -> None:
    """After a commit of several writes the writer holds the next one until
    `commit_spacing_secs` after it, so that writes coming rounds later (the
    next chats' turns under load) share its commit."""
    async with Database(tmp_path / "db.sqlite", commit_spacing_secs=0.5) as db:
        statements: list[str] = []
        await db.read(lambda c: c.set_trace_callback(statements.append))
        await asyncio.gather(
            db.write(lambda c: _insert(c, "a")), db.write(lambda c: _insert(c, "b"))
        )
        assert statements.count("COMMIT") == 1  # one commit of two: load
        held = db.submit(lambda c: _insert(c, "c"))  # wakes the writer
        later: list[asyncio.Future[None] | None] = []
        loop = asyncio.get_running_loop()
        # two rounds after the writer's wake-up: past its one-round yield, so
        # only the spacing can make this write share the commit
        loop.call_soon(loop.call_soon, lambda: later.append(db.submit(lambda c: _insert(c, "d"))))
        assert held is not None
        await held
        assert later[0] is not None
        await later[0]
        await db.read(lambda c: c.set_trace_callback(None))
        assert await db.read(_keys) == ["a", "b", "c", "d"]
    assert statements.count("COMMIT") == 2, statements


async def test_a_lone_write_is_never_held_back(open_storage: OpenStorage) -> None:
    """One chat's writes come one at a time: each commits at once, whatever
    the spacing (an hour here: holding one back would time the test out)."""
    async with open_storage(commit_spacing_secs=3600) as db:
        for key in ("a", "b", "c"):
            await asyncio.wait_for(db.write(lambda c, k=key: _insert(c, k)), 10)
        assert await db.read(_keys) == ["a", "b", "c"]


async def test_submit_queues_without_waiting_and_commits(open_storage: OpenStorage) -> None:
    async with open_storage(write_queue_capacity=2) as db:
        futures = [db.submit(lambda c, k=f"s{i}": _insert(c, k)) for i in range(3)]
        assert futures[2] is None  # the bounded queue was full: the caller must `write`
        await asyncio.gather(*(f for f in futures if f is not None))
    # committed: visible to a separate connection after close
    async with open_storage() as other:
        assert await other.read(_keys) == ["s0", "s1"]
    with pytest.raises(StorageClosed):
        await db.write(lambda c: _insert(c, "late"))


async def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    async with Database(path) as db:
        assert db.schema_version == len(MIGRATIONS)
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version={len(MIGRATIONS) + 1}")
    conn.close()
    with pytest.raises(SchemaTooNew, match="newer than this picobot understands"):
        await Database(path).open()


async def test_checkpoints_reach_the_database_file_without_the_writer(tmp_path: Path) -> None:
    path = tmp_path / "picobot.db"
    async with Database(path, checkpoint_interval_secs=0.05) as db:
        assert await db.read(lambda c: c.execute("PRAGMA wal_autocheckpoint").fetchone()[0]) == 0
        for key in ("a", "b", "c"):
            await db.write(lambda c, key=key: _insert(c, key))
        seen = db.checkpoints
        async with asyncio.timeout(10):
            while db.checkpoints < seen + 2:  # one full round after the last commit
                await asyncio.sleep(0.02)
        # the database file alone, without its WAL, holds the committed rows
        alone = tmp_path / "alone.db"
        alone.write_bytes(path.read_bytes())
        copy = sqlite3.connect(alone)
        try:
            assert _keys(copy) == ["a", "b", "c"]
        finally:
            copy.close()


class _CheckpointsInsideWrites:
    """Stands in for storage.sqlite.db._checkpoint so that each checkpoint of
    the checkpointer's connection runs while a write transaction is open, as
    under sustained load, by order rather than by timing. Each round goes:
    the checkpoint waits (`parked` is set for the test); the test sends one
    write; the write, inside its transaction, lets the checkpoint run and
    commits once it is done; the round then checkpoints on the writer's
    connection if the WAL is too long, and the next round waits again.
    `frames`: the WAL's length in frames at every checkpoint, in order
    (after a restart, the old length until the next commit starts it over)."""

    WAIT_SECS = 30.0  # only a broken test waits this long

    def __init__(self, checkpoint: Callable[[sqlite3.Connection], int]) -> None:
        self._checkpoint = checkpoint
        self._loop = asyncio.get_running_loop()
        self._lock = threading.Lock()
        self._waiting = False  # a checkpoint waits for a write to run inside
        self._finished = False
        self._inside = threading.Event()  # a write is inside its transaction
        self._done = threading.Event()  # the checkpoint inside it has run
        self.parked = asyncio.Event()  # a checkpoint waits: send the next write
        self.writer: sqlite3.Connection | None = None
        self.inside_writes = 0
        self.on_the_writer = 0
        self.frames: list[int] = []
        self.first_restart: int | None = None  # index into `frames`

    def checkpoint(self, conn: sqlite3.Connection) -> int:
        if conn is self.writer:  # the round's own: between two commits
            self.on_the_writer += 1
            if self.first_restart is None:
                self.first_restart = len(self.frames)
            return self._count(conn)
        with self._lock:
            if self._finished:
                return self._count(conn)
            self._waiting = True
        self._loop.call_soon_threadsafe(self.parked.set)
        if not self._inside.wait(self.WAIT_SECS):
            raise sqlite3.OperationalError("test: no write came")
        self._inside.clear()
        frames = self._count(conn)
        self._done.set()
        return frames

    def _count(self, conn: sqlite3.Connection) -> int:
        frames = self._checkpoint(conn)
        self.frames.append(frames)
        return frames

    def insert(self, conn: sqlite3.Connection, blob: bytes) -> None:
        """The write (on the writer's connection) the waiting checkpoint runs inside."""
        self.writer = conn
        conn.execute("INSERT INTO scratch (data) VALUES (?)", (blob,))
        with self._lock:
            if not self._waiting:
                raise RuntimeError("test: a write came while no checkpoint waited")
            self._waiting = False
            self._inside.set()
        if not self._done.wait(self.WAIT_SECS):
            raise TimeoutError("test: the checkpoint never ran")
        self._done.clear()
        self.inside_writes += 1

    def finish(self) -> None:
        """Checkpoints stop waiting for writes (the database can close)."""
        with self._lock:
            self._finished = True
            if self._waiting:
                self._waiting = False
                self._inside.set()


async def test_the_wal_stays_bounded_while_writes_never_pause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under sustained load a write transaction is open whenever a passive
    checkpoint runs, so the WAL never starts over from its beginning: it grew
    by every write (900 MB in 25 s in the 8-client bench) and kept that size.
    Here every checkpoint runs inside a write (_CheckpointsInsideWrites), for a
    fixed number of writes, whatever the machine's speed: the WAL stays
    bounded only because the writer's connection checkpoints itself, between
    two commits, whenever the WAL holds more than 64 frames."""
    import storage.sqlite.db

    path = tmp_path / "picobot.db"
    blob = b"x" * 16_384  # four pages of overflow: every row writes new pages
    writes = 200
    gate = _CheckpointsInsideWrites(storage.sqlite.db._checkpoint)
    monkeypatch.setattr(storage.sqlite.db, "_checkpoint", gate.checkpoint)
    async with Database(path, checkpoint_interval_secs=0, wal_restart_frames=64) as db:
        await db.write(lambda c: c.execute("CREATE TABLE scratch (data BLOB)"))
        try:
            async with asyncio.timeout(60):
                for _ in range(writes):
                    await gate.parked.wait()
                    gate.parked.clear()
                    await db.write(lambda c: gate.insert(c, blob))
        finally:
            gate.finish()
        wal = path.with_name(path.name + "-wal").stat().st_size
        frame = 24 + await db.read(lambda c: c.execute("PRAGMA page_size").fetchone()[0])
    assert gate.inside_writes == writes
    # Each row writes 6 frames: without the restarts the WAL grows by all of
    # them (1,200 frames, 5 MB); with them it starts over every dozen writes.
    assert gate.on_the_writer >= 10
    assert gate.first_restart is not None
    # After the first restart the file (a 32-byte header, then the frames) is
    # reused from its start: it never outgrows what it held then (the
    # migrations' frames), or 64 frames and two writes of 8 frames at most.
    most = max([*gate.frames[: gate.first_restart + 1], 64 + 2 * 8])
    assert wal <= 32 + most * frame, f"the WAL file grew to {wal} bytes, {most} frames allowed"


async def test_without_a_checkpoint_connection_the_writer_checkpoints_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import storage.sqlite.db

    def refuse(path: Path) -> sqlite3.Connection:
        raise sqlite3.OperationalError("unable to open database file")

    monkeypatch.setattr(storage.sqlite.db, "_checkpoint_connection", refuse)
    async with Database(tmp_path / "picobot.db") as db:

        def automatic(c: sqlite3.Connection) -> int:
            return int(c.execute("PRAGMA wal_autocheckpoint").fetchone()[0])

        async with asyncio.timeout(10):
            while await db.read(automatic) == 0:
                await asyncio.sleep(0.02)
        assert await db.read(automatic) == 1000
        await db.write(lambda c: _insert(c, "still writable"))


async def test_write_each_shares_a_commit_and_a_failure_stays_alone(
    open_storage: OpenStorage,
) -> None:
    async with open_storage() as db:

        def failing(conn: sqlite3.Connection) -> str:
            _insert(conn, "half-done")
            raise ValueError("boom")

        def insert(key: str) -> Callable[[sqlite3.Connection], str]:
            def fn(conn: sqlite3.Connection) -> str:
                _insert(conn, key)
                return key

            return fn

        results = await db.write_each([insert("a"), failing, insert("b")])
        assert results[0] == "a"
        assert isinstance(results[1], ValueError)
        assert results[2] == "b"
        assert await db.read(_keys) == ["a", "b"]


async def test_on_commit_runs_even_when_the_caller_is_cancelled(
    open_storage: OpenStorage,
) -> None:
    async with open_storage() as db:
        committed: list[str] = []

        def slow_insert(conn: sqlite3.Connection) -> str:
            _insert(conn, "k")
            time.sleep(0.2)  # on the storage thread: the caller is cancelled meanwhile
            return "k"

        caller = asyncio.create_task(db.write(slow_insert, on_commit=committed.append))
        await asyncio.sleep(0.05)
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
        async with asyncio.timeout(5):
            while not committed:
                await asyncio.sleep(0.01)
        assert committed == ["k"]
        assert await db.read(_keys) == ["k"]
