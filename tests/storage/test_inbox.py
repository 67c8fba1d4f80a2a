"""The inbox: unique per platform id, full round trip of the inbound message."""

from __future__ import annotations

from pathlib import Path

from gateway.bus import ChatType, InboundMessage, MediaKind, MediaRef, reply_handle
from storage import inbox
from storage.db import Database


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
    }
    fields.update(overrides)
    return InboundMessage(**fields)  # type: ignore[arg-type]


async def test_record_is_unique_and_round_trips(tmp_path: Path) -> None:
    async with Database(tmp_path / "db.sqlite") as db:
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
    ):
        assert getattr(restored, name) == getattr(original, name), name
    assert reply_handle(restored) == "om_123"
    assert reply_handle(_message(reply_ref=None)) == "evt-1"
