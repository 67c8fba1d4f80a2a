"""The durable inbox: every accepted inbound message, unique per platform id.

State machine: received → started (the user message is in the transcript)
→ done (the reply is in the outbox). Rows not `done` at start-up are resumed.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from gateway.bus import ChatType, InboundMessage, MediaKind, MediaRef
from storage.clock import now_iso, parse_iso

__all__ = [
    "InboxEntry",
    "InboxState",
    "inbound_from_json",
    "inbound_to_json",
    "mark_done",
    "mark_started",
    "record_inbound",
    "unfinished_entries",
]


class InboxState(StrEnum):
    RECEIVED = "received"
    STARTED = "started"
    DONE = "done"


@dataclass(frozen=True, slots=True)
class InboxEntry:
    id: int
    message: InboundMessage
    state: InboxState
    session_id: str | None


def inbound_to_json(message: InboundMessage) -> str:
    return json.dumps(
        {
            "channel": message.channel,
            "chat_id": message.chat_id,
            "sender_id": message.sender_id,
            "text": message.text,
            "message_id": message.message_id,
            "chat_type": message.chat_type.value,
            "media": [
                {"kind": m.kind.value, "path": m.path, "mime_type": m.mime_type, "name": m.name}
                for m in message.media
            ],
            "reply_to": message.reply_to,
            "mentions": list(message.mentions),
            "metadata": message.metadata,
            "received_at": message.received_at.isoformat(),
            "reply_ref": message.reply_ref,
        },
        ensure_ascii=False,
        default=str,
    )


def inbound_from_json(text: str) -> InboundMessage:
    d: dict[str, Any] = json.loads(text)
    return InboundMessage(
        channel=d["channel"],
        chat_id=d["chat_id"],
        sender_id=d["sender_id"],
        text=d["text"],
        message_id=d["message_id"],
        chat_type=ChatType(d["chat_type"]),
        media=tuple(
            MediaRef(MediaKind(m["kind"]), m["path"], m.get("mime_type"), m.get("name"))
            for m in d["media"]
        ),
        reply_to=d.get("reply_to"),
        mentions=tuple(d.get("mentions", ())),
        metadata=d.get("metadata", {}),
        received_at=parse_iso(d["received_at"]),
        reply_ref=d.get("reply_ref"),
    )


def record_inbound(conn: sqlite3.Connection, message: InboundMessage) -> int | None:
    """Insert; the new row id, or None when (channel, message_id) was seen before."""
    cursor = conn.execute(
        "INSERT INTO inbox (channel, platform_id, chat_id, sender_id, payload, received_at) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (channel, platform_id) DO NOTHING",
        (
            message.channel,
            message.message_id,
            message.chat_id,
            message.sender_id,
            inbound_to_json(message),
            now_iso(),
        ),
    )
    return cursor.lastrowid if cursor.rowcount == 1 else None


def mark_started(conn: sqlite3.Connection, inbox_ids: Sequence[int], session_id: str) -> None:
    conn.executemany(
        "UPDATE inbox SET state = 'started', session_id = ? WHERE id = ?",
        [(session_id, i) for i in inbox_ids],
    )


def mark_done(conn: sqlite3.Connection, inbox_ids: Sequence[int]) -> None:
    now = now_iso()
    conn.executemany(
        "UPDATE inbox SET state = 'done', finished_at = ? WHERE id = ?",
        [(now, i) for i in inbox_ids],
    )


def unfinished_entries(conn: sqlite3.Connection) -> list[InboxEntry]:
    rows = conn.execute(
        "SELECT id, payload, state, session_id FROM inbox WHERE state != 'done' ORDER BY id"
    ).fetchall()
    return [
        InboxEntry(
            r["id"], inbound_from_json(r["payload"]), InboxState(r["state"]), r["session_id"]
        )
        for r in rows
    ]
