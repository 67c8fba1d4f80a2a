"""The storage core: group commits, per-job isolation, schema versions."""

from __future__ import annotations

import asyncio
import sqlite3
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


async def test_the_wal_stays_bounded_while_writes_never_pause(tmp_path: Path) -> None:
    """Under sustained load a write transaction is open whenever a passive
    checkpoint runs, so the WAL never starts over from its beginning: it grew
    by every write (900 MB in 25 s in the 8-client bench) and kept that size."""
    path = tmp_path / "picobot.db"
    blob = b"x" * 16_384  # four pages of overflow: every row writes new pages
    async with Database(path, checkpoint_interval_secs=0.02, wal_restart_frames=64) as db:
        await db.write(lambda c: c.execute("CREATE TABLE scratch (data BLOB)"))

        def slow_insert(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO scratch (data) VALUES (?)", (blob,))
            # about a millisecond of SQL work, so that a transaction is nearly always open
            conn.execute(
                "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 5000)"
                " SELECT count(*) FROM n"
            ).fetchone()

        written = 0

        async def writer() -> None:
            nonlocal written
            while db.checkpoints < 40:
                await db.write(slow_insert)
                written += len(blob)

        async with asyncio.timeout(30):
            await asyncio.gather(*(writer() for _ in range(4)))
        wal = path.with_name(path.name + "-wal").stat().st_size
        frame = 24 + await db.read(lambda c: c.execute("PRAGMA page_size").fetchone()[0])
    assert written > 12 * 64 * frame
    # Without the restarts the WAL holds all of it (1.2 × with the frame
    # headers); with them, the 64 frames and about a round of writes, out of
    # 40 rounds (1/10 here), whatever the disk's fsync costs.
    assert wal <= written / 4, f"WAL grew to {wal} bytes after {written} bytes of writes"


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
