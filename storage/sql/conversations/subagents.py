"""Sub-agent transcripts: child sessions (sync functions for Database).

A child session is a session like any other (its messages in `messages`), on
the pseudo-channel `subagent` with the parent's session id as its chat id and
never bound to a chat, so no conversation lists or resumes it as its own.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from agent.messages import (
    CANCELLED_RESULT,
    ChatMessage,
    Role,
    repair_dangling_tool_calls,
)
from storage.sql.conversations import messages, sessions

__all__ = ["CHILD_CHANNEL", "ChildOpened", "children_of", "close_child", "open_child"]

CHILD_CHANNEL = "subagent"


@dataclass(frozen=True, slots=True)
class ChildOpened:
    history: list[ChatMessage]
    resumed: bool  # the transcript existed (a call run again after a crash)
    finished: str | None  # the final text of a child that had already ended


def open_child(
    conn: sqlite3.Connection,
    child_id: str,
    parent_id: str,
    title: str,
    new: Sequence[ChatMessage],
    run_id: str,
) -> ChildOpened:
    """The child's history: `new` stored in a new session, or the one it had
    (dangling tool calls answered `[interrupted]`)."""
    record = sessions.get_session(conn, child_id)
    if record is None:
        sessions.create_session(conn, CHILD_CHANNEL, parent_id, child_id, title, activate=False)
        messages.append_messages(conn, child_id, new, run_id)
        return ChildOpened(list(new), resumed=False, finished=None)
    history = messages.load_segment(conn, record.id, record.segment)
    last = history[-1] if history else None
    if last is not None and last.role is Role.ASSISTANT and not last.tool_calls:
        return ChildOpened(history, resumed=True, finished=last.content)
    added = repair_dangling_tool_calls(history)
    if added:
        messages.append_messages(conn, child_id, added, run_id)
    return ChildOpened(history + added, resumed=True, finished=None)


def close_child(conn: sqlite3.Connection, child_id: str, run_id: str, note: str) -> None:
    """End a child that did not finish: every dangling call `[cancelled]`, then
    `note` as its last word, so the transcript says how it ended."""
    history = messages.load_active_history(conn, child_id)
    added = repair_dangling_tool_calls(history, CANCELLED_RESULT)
    added.append(ChatMessage(Role.ASSISTANT, note))
    messages.append_messages(conn, child_id, added, run_id)


def children_of(conn: sqlite3.Connection, parent_id: str) -> list[sessions.SessionRecord]:
    rows = conn.execute(
        "SELECT id FROM sessions WHERE channel = ? AND chat_id = ? ORDER BY created_at, id",
        (CHILD_CHANNEL, parent_id),
    ).fetchall()
    found = [sessions.get_session(conn, r[0]) for r in rows]
    return [r for r in found if r is not None]
