"""The inbox: unique per platform id, full round trip of the inbound message."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime

from gateway.bus import (
    CHAT_REQUEST,
    ChatType,
    Delivery,
    InboundMessage,
    MediaKind,
    MediaRef,
    Origin,
    OutboundMessage,
    SessionPolicy,
    TurnRequest,
    reply_handle,
)
from storage.sql.conversations import turns
from storage.sql.delivery import inbox
from tests.storage.conftest import OpenStorage


def _message(**overrides: object) -> InboundMessage:
    fields: dict[str, object] = {
        "channel": "feishu",
        "chat_id": "oc_1",
        "sender_id": "ou_1",
        "text": "看这张图",
        "message_id": "evt-1",
        "chat_type": ChatType.GROUP,
        "media": (MediaRef(MediaKind.IMAGE, "/tmp/a.png", "image/png", "a.png"),),
        "reply_to": "earlier text",
        "mentions": ("ou_2",),
        "metadata": {"k": [1, 2]},
        "reply_ref": "om_123",
        "sender_aliases": ("on_1", "un_1"),
        "addressed": True,
        "language": "zh-hans",
    }
    fields.update(overrides)
    return InboundMessage(**fields)  # type: ignore[arg-type]


async def test_record_is_unique_and_round_trips(open_storage: OpenStorage) -> None:
    async with open_storage() as db:
        first = await db.write(lambda c: inbox.record_inbound(c, _message()))
        again = await db.write(lambda c: inbox.record_inbound(c, _message(text="changed")))
        other = await db.write(lambda c: inbox.record_inbound(c, _message(channel="telegram")))
        entries = await db.read(inbox.unfinished_entries)
    assert first is not None
    assert again is None  # same (channel, platform id): a duplicate
    assert other is not None
    assert other != first
    restored = entries[0].message
    original = _message()
    for name in (
        "channel",
        "chat_id",
        "sender_id",
        "text",
        "message_id",
        "chat_type",
        "media",
        "reply_to",
        "mentions",
        "metadata",
        "reply_ref",
        "request",
        "sender_aliases",
        "addressed",
        "language",
    ):
        assert getattr(restored, name) == getattr(original, name), name
    assert reply_handle(restored) == "om_123"
    assert reply_handle(_message(reply_ref=None)) == "evt-1"


async def test_the_turn_request_is_stored_with_the_row(open_storage: OpenStorage) -> None:
    request = TurnRequest(
        origin=Origin.SCHEDULER,
        agent="other",
        session=SessionPolicy.FRESH,
        delivery=Delivery.FAILURES_ONLY,
        notify_chat_id="oc_main",
        system_prompt="be brief",
        job_id="daily",
    )
    async with open_storage() as db:
        await db.write(lambda c: inbox.record_inbound(c, _message(request=request)))
        await db.write(lambda c: inbox.record_inbound(c, _message(message_id="evt-2")))
        entries = await db.read(inbox.unfinished_entries)
    assert [e.message.request for e in entries] == [request, CHAT_REQUEST]
    payload = json.loads(inbox.inbound_to_json(_message()))
    assert payload["request"] == {}  # a plain chat message stores nothing extra


def test_metadata_orjson_refuses_is_stored_as_json_would_store_it() -> None:
    """A row is written by orjson; what it refuses (an integer beyond 64 bits,
    a key that is not a string) or would write otherwise (a datetime: `str`,
    as json's `default`) is stored as json stores it."""
    when = datetime(2026, 12, 2, 6, 30, tzinfo=UTC)
    cases = [
        ({"big": 2**70}, {"big": 2**70}),
        ({"keyed": {1: "one"}}, {"keyed": {"1": "one"}}),
        ({"when": when}, {"when": str(when)}),
    ]
    for metadata, expected in cases:
        message = _message(metadata=metadata)
        stored = inbox.inbound_from_json(inbox.inbound_to_json(message))
        assert stored.metadata == expected
        assert stored == dataclasses.replace(message, metadata=expected)


def test_a_row_from_before_turn_requests_resumes_with_its_routing() -> None:
    row = json.loads(inbox.inbound_to_json(_message()))
    assert row.pop("request") == {}
    row["metadata"] = {
        "job_type": "x",
        "scheduler": {
            "job_id": "weekly",
            "silent": True,
            "notify_chat_id": "oc_main",
            "fresh_session": True,
            "agent": "other",
            "system_prompt": None,
        },
    }
    message = inbox.inbound_from_json(json.dumps(row))
    assert message.request == TurnRequest(
        origin=Origin.SCHEDULER,
        agent="other",
        session=SessionPolicy.FRESH,
        delivery=Delivery.FAILURES_ONLY,
        notify_chat_id="oc_main",
        job_id="weekly",
    )
    assert message.metadata == {"job_type": "x"}  # no control keys left behind


def test_a_row_from_before_access_control_counts_as_addressed() -> None:
    row = json.loads(inbox.inbound_to_json(_message(addressed=False)))
    assert row.pop("addressed") is False
    # it passed the adapter's own mention filter when it was recorded
    assert inbox.inbound_from_json(json.dumps(row)).addressed is True


async def test_a_broken_turn_closes_only_rows_not_yet_answered(open_storage: OpenStorage) -> None:
    """`turns.close_broken` after the turn's own answer was committed queues
    nothing more: one reply, not a failure notice besides it."""
    failure = OutboundMessage("feishu", "oc_1", "Something went wrong.")
    async with open_storage() as db:
        answered = await db.write(lambda c: inbox.record_inbound(c, _message()))
        waiting = await db.write(lambda c: inbox.record_inbound(c, _message(message_id="evt-2")))
        assert answered is not None
        assert waiting is not None
        reply = OutboundMessage("feishu", "oc_1", "the answer")
        await db.write(lambda c: inbox.answer(c, [answered], reply))
        again = await db.write(lambda c: turns.close_broken(c, "run-1", [answered], failure))
        closed = await db.write(lambda c: turns.close_broken(c, "run-2", [waiting], failure))
        texts = await db.read(lambda c: c.execute("SELECT text FROM outbox ORDER BY id").fetchall())
        left = await db.read(inbox.unfinished_entries)
    assert again is None
    assert closed is not None
    assert [r["text"] for r in texts] == ["the answer", "Something went wrong."]
    assert left == []
