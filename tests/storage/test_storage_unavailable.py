"""Storage errors the daemon outlives: a write the database refuses for now
(busy past the busy timeout, disk full) raises StorageUnavailable and sets
`write_failure` until a write passes; a database that cannot be opened at all
raises StorageUnusable with one line saying why."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from storage.errors import IntegrityError
from storage.sqlite.db import Database, StorageUnavailable, StorageUnusable
from tests.storage.conftest import OpenStorage
from tests.support import wait_until


def _insert(conn: sqlite3.Connection, key: str, value: str = "v") -> None:
    conn.execute(
        "INSERT INTO channel_state (channel, key, value, updated_at) VALUES ('t', ?, ?, 'now')",
        (key, value),
    )


def _keys(conn: sqlite3.Connection) -> list[str]:
    return [r[0] for r in conn.execute("SELECT key FROM channel_state ORDER BY key")]


def _short_busy_timeout(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA busy_timeout=50")


@pytest.fixture
def other_writer(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    """Another connection to the file, as another process would hold it."""
    conn = sqlite3.connect(tmp_path / "db.sqlite", isolation_level=None)
    try:
        yield conn
    finally:
        conn.close()


async def test_a_write_lock_held_elsewhere_is_unavailable_until_it_is_released(
    tmp_path: Path, other_writer: sqlite3.Connection
) -> None:
    async with Database(tmp_path / "db.sqlite", checkpoint_interval_secs=3600) as db:
        await db.read(_short_busy_timeout)  # the writer's own connection
        other_writer.execute("BEGIN IMMEDIATE")
        results = await asyncio.gather(
            db.write(lambda c: _insert(c, "a")),
            db.write(lambda c: _insert(c, "b")),
            return_exceptions=True,
        )
        assert all(isinstance(r, StorageUnavailable) for r in results)
        assert [r.reason for r in results if isinstance(r, StorageUnavailable)] == [
            "database is locked"
        ] * 2
        assert db.write_failure == "database is locked"
        assert not await db.probe_writes()
        assert db.write_failure == "database is locked"

        other_writer.execute("ROLLBACK")
        assert await db.probe_writes()
        assert db.write_failure is None
        await db.write(lambda c: _insert(c, "c"))
        assert await db.read(_keys) == ["c"]


async def test_the_checkpointer_clears_the_failure_once_writes_pass_on_an_idle_database(
    tmp_path: Path, other_writer: sqlite3.Connection
) -> None:
    async with Database(tmp_path / "db.sqlite", checkpoint_interval_secs=0.05) as db:
        await db.read(_short_busy_timeout)
        other_writer.execute("BEGIN IMMEDIATE")
        with pytest.raises(StorageUnavailable):
            await db.write(lambda c: _insert(c, "a"))
        other_writer.execute("ROLLBACK")
        await wait_until(lambda: db.write_failure is None)  # though nobody wrote


async def test_a_full_database_fails_the_whole_batch_as_unavailable(tmp_path: Path) -> None:
    """SQLITE_FULL (here from max_page_count; a full disk says the same) may
    roll the transaction back: every job of the batch fails alike, none half."""
    async with Database(tmp_path / "db.sqlite", checkpoint_interval_secs=3600) as db:
        await db.write(lambda c: _insert(c, "before"))
        await db.read(
            lambda c: c.execute(
                f"PRAGMA max_page_count={c.execute('PRAGMA page_count').fetchone()[0]}"
            )
        )
        big = "x" * 20_000  # needs overflow pages the file may not grow by
        results = await asyncio.gather(
            db.write(lambda c: _insert(c, "small")),
            db.write(lambda c: _insert(c, "big", big)),
            return_exceptions=True,
        )
        assert all(isinstance(r, StorageUnavailable) for r in results), results
        assert db.write_failure == "database or disk is full"
        assert await db.read(_keys) == ["before"]

        await db.read(lambda c: c.execute("PRAGMA max_page_count=1073741823"))
        await db.write(lambda c: _insert(c, "big", big))
        assert db.write_failure is None
        assert await db.read(_keys) == ["before", "big"]


async def test_a_refused_constraint_is_not_unavailable(open_storage: OpenStorage) -> None:
    async with open_storage() as db:
        await db.write(lambda c: _insert(c, "a"))
        with pytest.raises((sqlite3.IntegrityError, IntegrityError)):  # SQLite's, or the driver's
            await db.write(lambda c: _insert(c, "a"))
        assert db.write_failure is None


@pytest.mark.parametrize("where", ["parent is a file", "db is a directory"])
async def test_a_database_that_cannot_be_opened_is_one_line(tmp_path: Path, where: str) -> None:
    """Cases that stop root too (chmod does not): a file where the storage
    folder must be, a folder where the database file must be."""
    if where == "parent is a file":
        (tmp_path / "storage").write_text("not a folder")
    else:
        (tmp_path / "storage" / "sessions.db").mkdir(parents=True)
    db = Database(tmp_path / "storage" / "sessions.db")
    with pytest.raises(StorageUnusable) as caught:
        await db.open()
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"cannot open the database {tmp_path}/storage/sessions.db: ")
    if where == "parent is a file":
        assert message.endswith(f"{tmp_path}/storage is not a directory")
