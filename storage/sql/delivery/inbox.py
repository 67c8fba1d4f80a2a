"""The durable inbox: every accepted inbound message, unique per platform id.

State machine: received → started (the user message is in the transcript)
→ done (the reply is in the outbox). Rows not `done` at start-up are resumed.
`answer` is the one way a row becomes `done`: with its reply's outbox row, in
the same transaction.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

import orjson

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
    make_storable,
)
from storage.clock import now_iso, parse_iso
from storage.sql.delivery import dead_letters, outbox
from storage.sql.dialect import inserted_id

__all__ = [
    "InboxEntry",
    "InboxState",
    "NotAMessage",
    "Requeued",
    "answer",
    "dead_letter_message",
    "inbound_from_json",
    "inbound_to_json",
    "mark_done",
    "mark_started",
    "record_inbound",
    "requeue_dead_letter",
    "set_aside_unreadable",
    "unfinished_by_id",
    "unfinished_duplicate",
    "unfinished_entries",
    "unfinished_keys",
    "unfinished_of_chats",
]

# The unfinished rows are read at every start through their partial index:
# sorting by id, SQLite otherwise walks the whole table in id order, every
# finished row kept for the retention period (20 ms at 100,000 here).
_UNFINISHED = "FROM inbox INDEXED BY inbox_unfinished WHERE state != 'done' ORDER BY id"


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


# what json hands to `default` (str), orjson hands it too
_AS_JSON_WOULD: Final = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME


def inbound_to_json(message: InboundMessage, *, ensure_ascii: bool = False) -> str:
    """`ensure_ascii`: escape everything (never fails to store, even text that
    is not valid Unicode): the form a dead letter keeps."""
    fields = {
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
        "request": message.request.to_dict(),
        "received_at": message.received_at.isoformat(),
        "reply_ref": message.reply_ref,
        "sender_aliases": list(message.sender_aliases),
        "addressed": message.addressed,
        "language": message.language,
    }
    if not ensure_ascii:
        try:  # orjson: on the path of every message, json takes ten times as long
            return orjson.dumps(fields, default=str, option=_AS_JSON_WOULD).decode()
        except TypeError:  # what it refuses (a lone surrogate, an integer beyond 64 bits)
            pass
    return json.dumps(fields, ensure_ascii=ensure_ascii, default=str)


def _legacy_request(metadata: dict[str, Any]) -> TurnRequest:
    """Rows recorded before TurnRequest carried a scheduled turn's routing in
    metadata["scheduler"]; read it once more so such a row resumes as asked."""
    routing = metadata.pop("scheduler", None)
    if not isinstance(routing, dict):
        return CHAT_REQUEST
    silent = bool(routing.get("silent"))
    notify = routing.get("notify_chat_id")
    return TurnRequest(
        origin=Origin.SCHEDULER,
        agent=routing.get("agent") or None,
        session=SessionPolicy.FRESH if routing.get("fresh_session") else SessionPolicy.ACTIVE,
        delivery=Delivery.FAILURES_ONLY if silent else Delivery.REPLY,
        notify_chat_id=str(notify) if silent and notify else None,
        system_prompt=routing.get("system_prompt") or None,
        job_id=routing.get("job_id"),
    )


def inbound_from_json(text: str) -> InboundMessage:
    d: dict[str, Any] = json.loads(text)
    metadata: dict[str, Any] = d.get("metadata", {})
    stored = d.get("request")
    request = TurnRequest.from_dict(stored) if stored is not None else _legacy_request(metadata)
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
        metadata=metadata,
        request=request,
        received_at=parse_iso(d["received_at"]),
        reply_ref=d.get("reply_ref"),
        sender_aliases=tuple(d.get("sender_aliases", ())),
        # rows from before access control passed the adapters' mention filter
        addressed=bool(d.get("addressed", True)),
        language=d.get("language"),
    )


def record_inbound(conn: sqlite3.Connection, message: InboundMessage) -> int | None:
    """Insert; the new row id, or None when (channel, chat_id, message_id) was
    seen before. The chat is part of the key, so no channel's id scheme can
    make two chats' messages collide."""
    cursor = conn.execute(
        "INSERT INTO inbox (channel, platform_id, chat_id, sender_id, payload, received_at) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (channel, chat_id, platform_id) DO NOTHING RETURNING id",
        (
            message.channel,
            message.message_id,
            message.chat_id,
            message.sender_id,
            inbound_to_json(message),
            now_iso(),
        ),
    )
    return inserted_id(cursor)


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


def answer(
    conn: sqlite3.Connection, inbox_ids: Sequence[int], reply: OutboundMessage | None
) -> int | None:
    """Close `inbox_ids` (→ done) with `reply` queued as an outbox row tied to
    the last of them; returns that row's id (None when there is no reply)."""
    row_id = outbox.enqueue(conn, reply, inbox_ids[-1]) if reply is not None else None
    mark_done(conn, inbox_ids)
    return row_id


def unfinished_entries(conn: sqlite3.Connection) -> list[InboxEntry]:
    rows = conn.execute(f"SELECT id, payload, state, session_id {_UNFINISHED}").fetchall()
    return [_entry(r) for r in rows]


def unfinished_by_id(conn: sqlite3.Connection, ids: Sequence[int]) -> list[InboxEntry]:
    """The rows of `ids` still unfinished, in id order (a worker handed them
    by another: docs/scale-out.md)."""
    found: list[InboxEntry] = []
    for start in range(0, len(ids), 500):
        part = tuple(ids[start : start + 500])
        marks = ",".join("?" * len(part))
        found += [
            _entry(r)
            for r in conn.execute(
                f"SELECT id, payload, state, session_id FROM inbox WHERE id IN ({marks}) "
                "AND state != 'done'",
                part,
            )
        ]
    return sorted(found, key=lambda e: e.id)


def unfinished_of_chats(
    conn: sqlite3.Connection, chats: Sequence[tuple[str, str]]
) -> list[InboxEntry]:
    """The unfinished rows of `chats` (channel, chat id), each chat's in id
    order, through their own partial index."""
    found: list[InboxEntry] = []
    for channel, chat_id in chats:
        found += [
            _entry(r)
            for r in conn.execute(
                "SELECT id, payload, state, session_id FROM inbox "
                "INDEXED BY inbox_unfinished_by_chat WHERE channel = ? AND chat_id = ? "
                "AND state != 'done' ORDER BY id",
                (channel, chat_id),
            )
        ]
    return found


def unfinished_keys(conn: sqlite3.Connection) -> list[tuple[int, str, str]]:
    """(id, channel, chat id) of every unfinished row, without their payloads."""
    rows = conn.execute(f"SELECT id, channel, chat_id {_UNFINISHED}").fetchall()
    return [(int(r[0]), r[1], r[2]) for r in rows]


def unfinished_duplicate(conn: sqlite3.Connection, message: InboundMessage) -> int | None:
    """The id of the unfinished row `message` duplicates (a redelivery of a
    message recorded before); None when it is done or unknown."""
    row = conn.execute(
        "SELECT id FROM inbox WHERE channel = ? AND chat_id = ? AND platform_id = ? "
        "AND state != 'done'",
        (message.channel, message.chat_id, message.message_id),
    ).fetchone()
    return None if row is None else int(row[0])


def _entry(r: Any) -> InboxEntry:
    return InboxEntry(
        r["id"], inbound_from_json(r["payload"]), InboxState(r["state"]), r["session_id"]
    )


# the reason of a row set aside: names the row, which stays (closed)
_SET_ASIDE: Final = "inbox row {} unreadable at start"
_SET_ASIDE_ROW: Final = re.compile(r"inbox row (\d+) unreadable at start")


def set_aside_unreadable(conn: sqlite3.Connection) -> list[int]:
    """Unfinished rows whose payload no longer reads as a message (edited by
    hand, or written by a newer picobot) become dead letters and are closed,
    in this transaction, so one of them cannot stop every later start. Their ids."""
    gone: list[int] = []
    for r in conn.execute(f"SELECT id, channel, platform_id, payload {_UNFINISHED}").fetchall():
        try:
            inbound_from_json(r["payload"])
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            reason = f"{_SET_ASIDE.format(r['id'])}: {type(exc).__name__}: {exc}"
            dead_letters.record(conn, r["channel"], r["platform_id"], r["payload"], reason)
            gone.append(r["id"])
    mark_done(conn, gone)
    return gone


class NotAMessage(ValueError):
    """A dead letter that is not a message the gateway wrote (a platform's raw
    event, a payload cut short): it cannot be recorded again, only discarded."""


@dataclass(frozen=True, slots=True)
class Requeued:
    message: InboundMessage
    inbox_id: int | None  # None: the inbox had it already (nothing new to answer)


def dead_letter_message(letter: dead_letters.DeadLetter) -> InboundMessage | None:
    """The message a dead letter keeps when the gateway wrote it (a message
    the inbox refused, an inbox row set aside at start: `inbound_to_json`),
    made storable as the bus makes every message; None for anything else."""
    if letter.truncated:
        return None
    try:
        message = inbound_from_json(letter.payload)
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None
    if message.channel != letter.channel:
        return None
    make_storable(message)
    return message


def requeue_dead_letter(conn: sqlite3.Connection, letter_id: int) -> Requeued | None:
    """Record a dead letter's message in the inbox and delete the dead letter,
    in this transaction (None: no such dead letter). The row is `received`:
    the running gateway routes it at once (gateway.ingress), else the next
    start does, as it does every unfinished row. A row set aside at start
    is opened again (it stayed, closed unanswered). Raises `NotAMessage` for
    a dead letter that is not a message; if the inbox refuses it again, the
    error rolls the transaction back and the dead letter stays."""
    letter = dead_letters.get(conn, letter_id)
    if letter is None:
        return None
    message = dead_letter_message(letter)
    if message is None:
        what = "cut short" if letter.truncated else f"a {letter.channel} event it could not read"
        raise NotAMessage(
            f"dead letter {letter_id} is not a message the gateway wrote ({what}): "
            "it can only be discarded"
        )
    inbox_id: int | None = None
    if (aside := _SET_ASIDE_ROW.match(letter.reason)) is not None:
        reopened = conn.execute(
            "UPDATE inbox SET payload = ?, state = 'received', session_id = NULL, "
            "finished_at = NULL WHERE id = ? AND state = 'done' RETURNING id",
            (inbound_to_json(message), int(aside.group(1))),
        )
        inbox_id = inserted_id(reopened)
    if inbox_id is None:
        inbox_id = record_inbound(conn, message)
    dead_letters.discard(conn, letter_id)
    return Requeued(message, inbox_id)
