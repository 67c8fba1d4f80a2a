"""The dead-letter table, the collision-free inbox key (migration 5), storable text."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from gateway.bus import InboundMessage, storable
from storage.sql.delivery import dead_letters
from storage.sql.delivery.inbox import record_inbound
from storage.sqlite.migrations import MIGRATIONS
from tests.storage.conftest import OpenStorage


def test_lone_surrogates_are_replaced_and_pairs_joined() -> None:
    assert storable("plain ü") == "plain ü"
    assert storable("a\ud83db") == "a\ufffdb"
    assert storable("\ud83d\ude00") == "\U0001f600"  # a pair sent as two escapes
    storable("x\udfff\ud800").encode("utf-8")  # never raises afterwards


async def test_dead_letters_are_kept_capped_and_listed(open_storage: OpenStorage) -> None:
    async with open_storage() as db:
        big = "x" * (dead_letters.PAYLOAD_MAX_CHARS + 10)

        def write(conn: sqlite3.Connection) -> tuple[int, int]:
            a = dead_letters.record(conn, "telegram", "17", big, "malformed update: TypeError")
            b = dead_letters.record(conn, "feishu", None, b"\xff\xfe raw", "bad")
            return a, b

        a, b = await db.write(write)
        letters = await db.read(lambda c: dead_letters.recent(c, 10))
        only = await db.read(lambda c: dead_letters.recent(c, 10, "telegram"))
        first = await db.read(lambda c: dead_letters.get(c, a))
    assert [d.id for d in letters] == [b, a]
    assert [d.id for d in only] == [a]
    assert first is not None
    assert first.truncated
    assert len(first.payload) == dead_letters.PAYLOAD_MAX_CHARS
    assert letters[0].payload == "\ufffd\ufffd raw"


async def test_inbox_keys_cannot_collide_across_chats(open_storage: OpenStorage) -> None:
    # the WebSocket's platform id is "chat/client-id": chat a/b + c and chat a + b/c
    one = InboundMessage("websocket", "a/b", "s", "one", "a/b/c")
    two = InboundMessage("websocket", "a", "s", "two", "a/b/c")
    async with open_storage() as db:
        ids = await db.write(lambda c: (record_inbound(c, one), record_inbound(c, two)))
        again = await db.write(lambda c: record_inbound(c, one))
    assert None not in ids
    assert again is None  # a real duplicate is still one


def test_migration_5_keeps_inbox_rows_and_ids(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "old.sqlite")
    for script in MIGRATIONS[:4]:
        conn.executescript(script)
    conn.execute(
        "INSERT INTO inbox (id, channel, platform_id, chat_id, sender_id, payload, state,"
        " received_at) VALUES (7, 'websocket', 'a/b/c', 'a/b', 's', '{}', 'done', 'now')"
    )
    conn.executescript(MIGRATIONS[4])
    rows = conn.execute("SELECT id, platform_id, chat_id, state FROM inbox").fetchall()
    conn.execute(
        "INSERT INTO inbox (channel, platform_id, chat_id, sender_id, payload, received_at)"
        " VALUES ('websocket', 'a/b/c', 'a', 's', '{}', 'now')"
    )
    conn.close()
    assert rows == [(7, "a/b/c", "a/b", "done")]
