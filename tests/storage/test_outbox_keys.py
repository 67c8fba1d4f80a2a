"""Outbox idempotency keys: random per row, stored with it, the same on every retry."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from gateway.bus import OutboundMessage
from storage.sql.delivery import outbox
from storage.sqlite.db import SqliteDatabase
from storage.sqlite.migrations import MIGRATIONS
from tests.storage.conftest import OpenStorage


async def test_each_row_keeps_its_own_key_across_reads(open_storage: OpenStorage) -> None:
    first = OutboundMessage("telegram", "1", "a")
    second = OutboundMessage("telegram", "1", "b")
    assert first.idempotency_key != second.idempotency_key
    async with open_storage() as db:
        ids = await db.write(lambda c: [outbox.enqueue(c, first), outbox.enqueue(c, second)])
        rows = await db.read(lambda c: outbox.list_rows(c))
    assert [r.id for r in rows] == ids
    # a retry of a row (read back from the outbox) carries the key the row was written with
    assert [r.to_message().idempotency_key for r in rows] == [
        first.idempotency_key,
        second.idempotency_key,
    ]
    assert outbox.OutboxRow.new(first, ids[0]).idempotency_key == first.idempotency_key


async def test_a_message_queued_twice_makes_two_rows_with_distinct_keys(
    open_storage: OpenStorage,
) -> None:
    message = OutboundMessage("feishu", "oc_1", "twice")
    async with open_storage() as db:
        await db.write(lambda c: [outbox.enqueue(c, message), outbox.enqueue(c, message)])
        rows = await db.read(lambda c: outbox.list_rows(c))
    keys = [r.idempotency_key for r in rows]
    assert len(rows) == 2
    assert len(set(keys)) == 2
    assert message.idempotency_key in keys


async def test_rows_written_before_the_key_column_get_random_keys_of_their_own(
    tmp_path: Path,
) -> None:
    path = tmp_path / "db.sqlite"
    conn = sqlite3.connect(path)
    # every migration before the one that adds the key (its number may change at a merge)
    before = next(i for i, script in enumerate(MIGRATIONS) if "idempotency_key" in script)
    for script in MIGRATIONS[:before]:
        conn.executescript(script)
    for n in range(3):
        conn.execute(
            "INSERT INTO outbox (channel, chat_id, text, created_at) VALUES ('wechat', 'u', ?, ?)",
            (f"old {n}", "2026-01-01T00:00:00+00:00"),
        )
    conn.execute(f"PRAGMA user_version={before}")
    conn.commit()
    conn.close()
    async with SqliteDatabase(path) as db:
        rows = await db.read(lambda c: outbox.list_rows(c))
    keys = {r.to_message().idempotency_key for r in rows}
    assert len(keys) == 3
    assert all(len(k) == 32 for k in keys)
