"""`send_session_message`'s unit of work (a sync function for Database): the
text as an outbox row and as an assistant message in the target chat's active
session, in one transaction — delivered and recorded, or neither. The send is
counted in the same transaction (storage.sql.access.rate_events) against the sender and
the target chat: a send over the limit stores nothing, and two concurrent
turns cannot both pass the check."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from agent.messages import ChatMessage, Marker, Role
from gateway.bus import OutboundMessage
from storage.sql.access import rate_events
from storage.sql.access.rate_events import RateLimit
from storage.sql.conversations import messages, sessions
from storage.sql.delivery import outbox

__all__ = ["Limited", "Queued", "record_session_message"]


@dataclass(frozen=True, slots=True)
class Queued:
    """The message as queued (with the target session's id) and its outbox row."""

    message: OutboundMessage
    row_id: int


@dataclass(frozen=True, slots=True)
class Limited:
    """Nothing was stored: a key had used up its limit; room again in this many seconds."""

    retry_after_secs: float


def record_session_message(
    conn: sqlite3.Connection,
    message: OutboundMessage,
    base_id: str,
    limit: RateLimit,
    keys: Sequence[str],
    now: datetime,
) -> Queued | Limited:
    """Count the send under `keys`, then store it; the chat's session is
    created if it has none yet. The history row has no run id: a failing turn
    must not hide what was already sent."""
    wait = rate_events.take(conn, limit, keys, now)
    if wait is not None:
        return Limited(wait)
    record = sessions.ensure_active_session(conn, message.channel, message.chat_id, base_id)
    note = ChatMessage(Role.ASSISTANT, message.text, marker=Marker.SESSION_MESSAGE.value)
    messages.append_messages(conn, record.id, [note])
    queued = dataclasses.replace(message, session_id=record.id)
    return Queued(queued, outbox.enqueue(conn, queued))
