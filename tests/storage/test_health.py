"""`inspect_database`: a read-only look at a database file for `picobot doctor`."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from gateway.bus import OutboundMessage
from storage.sql.delivery import outbox
from storage.sqlite.db import Database
from storage.sqlite.health import UnreadableDatabase, inspect_database
from storage.sqlite.migrations import MIGRATIONS


async def test_a_fresh_database_is_current_and_intact(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    async with Database(path):
        pass
    before = path.read_bytes()
    health = inspect_database(path)
    assert health.schema_version == len(MIGRATIONS)
    assert health.integrity == ["ok"]
    assert health.failed_outbox == 0
    assert path.read_bytes() == before  # read-only


async def test_counts_only_the_outbox_rows_that_gave_up(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    message = OutboundMessage(channel="telegram", chat_id="1", text="hi")

    def fill(c: sqlite3.Connection) -> None:
        for _ in range(3):
            outbox.mark_failed(c, outbox.enqueue(c, message), "HTTP 400")
        outbox.mark_sent(c, [outbox.enqueue(c, message)])
        outbox.enqueue(c, message)  # still pending

    async with Database(path) as db:
        await db.write(fill)
    assert inspect_database(path).failed_outbox == 3


def test_a_database_without_tables_has_version_zero(tmp_path: Path) -> None:
    path = tmp_path / "empty.sqlite"
    path.write_bytes(b"")  # an empty file is a valid, empty SQLite database
    health = inspect_database(path)
    assert (health.schema_version, health.integrity, health.failed_outbox) == (0, ["ok"], 0)


def test_a_file_that_is_not_sqlite_is_unreadable(tmp_path: Path) -> None:
    path = tmp_path / "garbage.sqlite"
    path.write_bytes(b"definitely not sqlite" * 200)
    with pytest.raises(UnreadableDatabase, match="not a database"):
        inspect_database(path)
