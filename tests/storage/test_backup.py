"""`storage.sqlite.backup` directly: what `picobot backup` / `restore` build on (see tests/gateway/cli/)."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gateway.access.pairing import CODE_RULES
from storage.sqlite.backup import BackupError, DatabaseInUse, backup_database, restore_database
from storage.sqlite.db import Database
from storage.sqlite.migrations import MIGRATIONS
from storage.store import Store


async def _database(path: Path) -> None:
    async with Database(path):
        pass


async def test_backup_reports_version_and_row_counts(tmp_path: Path) -> None:
    db_path = tmp_path / "db.sqlite"
    await _database(db_path)
    report = backup_database(db_path, tmp_path / "copy.db")
    assert report.path == tmp_path / "copy.db"
    assert report.schema_version == len(MIGRATIONS)
    assert report.counts["sessions"] == 0
    assert report.size == report.path.stat().st_size
    assert not (tmp_path / "copy.db.partial").exists()
    with pytest.raises(BackupError, match="already exists"):
        backup_database(db_path, tmp_path / "copy.db")


async def test_restore_in_use_raises_unless_forced(tmp_path: Path) -> None:
    db_path, copy = tmp_path / "db.sqlite", tmp_path / "copy.db"
    await _database(db_path)
    backup_database(db_path, copy)
    forced: list[None] = []
    holder = sqlite3.connect(db_path)
    try:
        holder.execute("SELECT count(*) FROM sessions").fetchone()
        with pytest.raises(DatabaseInUse, match="--force"):
            restore_database(copy, db_path, force=False, on_forced=lambda: forced.append(None))
        assert forced == []
        aside = restore_database(copy, db_path, force=True, on_forced=lambda: forced.append(None))
    finally:
        holder.close()
    assert forced == [None]
    assert aside is not None
    assert aside.is_file()


def test_restore_onto_nothing_keeps_nothing_aside(tmp_path: Path) -> None:
    copy = tmp_path / "copy.db"
    copy.write_bytes(b"")  # an empty file is a valid, empty SQLite database
    db_path = tmp_path / "new" / "storage" / "sessions.db"
    assert restore_database(copy, db_path, force=False) is None
    assert db_path.is_file()


async def test_pairings_are_in_the_backup(tmp_path: Path) -> None:
    db_path, copy = tmp_path / "db.sqlite", tmp_path / "copy.db"
    now = datetime.now(UTC)
    async with Database(db_path) as db:
        store = Store(db)
        issued = await store.issue_pairing_code(
            "telegram", "42", "42", lambda: "ABCD-EFGH", now, CODE_RULES
        )
        assert issued.pairing is not None
        await store.approve_pairing("ABCD-EFGH", "telegram:1", now, None)
    report = backup_database(db_path, copy)
    assert report.counts["pairings"] == 1
    async with Database(copy) as db:
        assert await Store(db).approved_senders([("telegram", "42")]) == {("telegram", "42")}
