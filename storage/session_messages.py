"""`send_session_message`'s unit of work (a sync function for Database): the
text as an outbox row and as an assistant message in the target chat's active
session, in one transaction — delivered and recorded, or neither."""

from __future__ import annotations

import dataclasses
import sqlite3

from agent.messages import ChatMessage, Marker, Role
from gateway.bus import OutboundMessage
from storage import messages, outbox, sessions

__all__ = ["record_session_message"]


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
