"""send_session_message's unit of work (storage/sql/conversations/sent_messages.py): the send
is counted against its keys in its own transaction; over the limit nothing is
stored, neither the outbox row nor the history note."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gateway.bus import OutboundMessage
from storage.database import Database
from storage.sql.access.rate_events import RateLimit
from storage.sql.conversations.sent_messages import Limited, Queued
from storage.store import Store
from tests.storage.conftest import OpenStorage

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
LIMIT = RateLimit("session_message", 2, timedelta(minutes=1))


async def send(store: Store, chat: str, sender: str, at: datetime) -> Queued | Limited:
    def ignore(_: Queued | Limited) -> None:
        return None

    message = OutboundMessage("telegram", chat, f"to {chat}")
    keys = (f"from:{sender}", f"to:telegram:{chat}")
    return await store.transcripts.record_session_message(
        message, f"telegram:{chat}", LIMIT, keys, at, ignore
    )


async def outbox_chats(db: Database) -> list[str]:
    found = await db.read(lambda c: c.execute("SELECT chat_id FROM outbox ORDER BY id").fetchall())
    return [r["chat_id"] for r in found]


async def test_a_send_over_the_senders_limit_stores_nothing(open_storage: OpenStorage) -> None:
    async with open_storage() as db:
        store = Store(db)
        first = await send(store, "1", "ws:alice", T0)
        await send(store, "2", "ws:alice", T0)
        third = await send(store, "3", "ws:alice", T0 + timedelta(seconds=30))
        other_sender = await send(store, "3", "ws:bob", T0 + timedelta(seconds=30))
        assert isinstance(first, Queued)
        assert first.message.session_id is not None
        assert third == Limited(pytest.approx(30.0))
        assert isinstance(other_sender, Queued)
        assert await outbox_chats(db) == ["1", "2", "3"]
        assert await store.active_session("telegram", "3") is not None  # bob's went in


async def test_a_send_over_the_targets_limit_stores_nothing(open_storage: OpenStorage) -> None:
    async with open_storage() as db:
        store = Store(db)
        await send(store, "1", "ws:alice", T0)
        await send(store, "1", "ws:bob", T0)
        assert isinstance(await send(store, "1", "ws:carol", T0), Limited)
        assert await outbox_chats(db) == ["1", "1"]
