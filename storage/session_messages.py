"""`send_session_message`'s unit of work (a sync function for Database): the
text as an outbox row and as an assistant message in the target chat's active
session, in one transaction — delivered and recorded, or neither. Also the
sending session's earlier sends, read back from its stored tool results (the
rate window a restart must not forget)."""

from __future__ import annotations

import dataclasses
import sqlite3
from datetime import datetime

from agent.messages import ChatMessage, Marker, Role
from gateway.bus import OutboundMessage
from storage import messages, outbox, sessions
from storage.clock import parse_iso

__all__ = ["record_session_message", "sent_between"]


def record_session_message(
    conn: sqlite3.Connection, message: OutboundMessage, base_id: str
) -> tuple[OutboundMessage, int]:
    """The message as queued (with the target session's id) and its outbox row;
    the chat's session is created if it has none yet. The history row has no
    run id: a failing turn must not hide what was already sent."""
    record = sessions.ensure_active_session(conn, message.channel, message.chat_id, base_id)
    note = ChatMessage(Role.ASSISTANT, message.text, marker=Marker.SESSION_MESSAGE.value)
    messages.append_messages(conn, record.id, [note])
    queued = dataclasses.replace(message, session_id=record.id)
    return queued, outbox.enqueue(conn, queued)


def sent_between(
    conn: sqlite3.Connection,
    session_id: str,
    tool: str,
    result_prefix: str,
    since: datetime,
    until: datetime,
) -> list[datetime]:
    """When `session_id`'s calls of `tool` whose result starts with
    `result_prefix` (a send that happened) were stored, in [since, until)."""
    rows = conn.execute(
        "SELECT created_at FROM messages WHERE session_id = ? AND role = 'tool' "
        "AND name = ? AND substr(content, 1, ?) = ?",
        (session_id, tool, len(result_prefix), result_prefix),
    ).fetchall()
    stamps = (parse_iso(r["created_at"]) for r in rows)
    return sorted(t for t in stamps if since <= t < until)
