"""A conversation's sessions as the chat commands change them: one function per
command, each one transaction (run through `storage.store.Store`).

They return what happened; the wording for the chat is the caller's.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field

from agent.messages import ChatMessage, Marker, Usage
from storage.sql.conversations import messages, sessions, subagents
from storage.sql.conversations.sessions import SessionRecord, SessionStatus
from storage.sql.dialect import is_postgres

__all__ = [
    "RecentHistory",
    "Replaced",
    "SessionStats",
    "archive_session",
    "delete_session",
    "find_session",
    "list_with_active",
    "new_session",
    "recent_history",
    "rename_active",
    "session_stats",
    "switch_session",
]


@dataclass(frozen=True, slots=True)
class Replaced:
    """A session archived or deleted, and the fresh one now active (if any)."""

    old: SessionRecord
    fresh: SessionRecord | None


@dataclass(frozen=True, slots=True)
class RecentHistory:
    """The newest messages of a session's active history, for display."""

    record: SessionRecord | None  # None: the conversation has no session yet
    messages: list[tuple[ChatMessage, str | None]]  # (message, run id)
    more: bool  # older messages exist


@dataclass(frozen=True, slots=True)
class SessionStats:
    record: SessionRecord
    message_count: int  # in the active history
    chars: int  # of content, reasoning and tool-call arguments in the active history
    tokens: Usage = field(default_factory=Usage)  # every message of the session, all segments


def find_session(records: list[SessionRecord], ref: str) -> SessionRecord | None:
    """`ref` is a 1-based number from /sessions, a session id or a title."""
    if ref.isdigit() and 1 <= int(ref) <= len(records):
        return records[int(ref) - 1]
    for record in records:
        if ref in (record.id, record.title):
            return record
    return None


def new_session(
    conn: sqlite3.Connection, channel: str, chat_id: str, base_id: str, title: str | None
) -> SessionRecord:
    return sessions.create_next_session(conn, channel, chat_id, base_id, title)


def list_with_active(
    conn: sqlite3.Connection, channel: str, chat_id: str
) -> tuple[list[SessionRecord], SessionRecord | None]:
    return (
        sessions.list_sessions(conn, channel, chat_id),
        sessions.active_session(conn, channel, chat_id),
    )


def switch_session(
    conn: sqlite3.Connection, channel: str, chat_id: str, ref: str
) -> SessionRecord | None:
    """Make the session `ref` names active (un-archiving it); None if none matches.

    Switching counts as activity (`updated_at`): a session chosen with /use is
    not replaced at once by the idle reset (gateway.turns.session_reset)."""
    target = find_session(sessions.list_sessions(conn, channel, chat_id), ref)
    if target is None:
        return None
    sessions.bind_session(conn, channel, chat_id, target.id)
    sessions.set_session_status(conn, target.id, SessionStatus.ACTIVE)
    return target


def rename_active(
    conn: sqlite3.Connection, channel: str, chat_id: str, base_id: str, title: str
) -> SessionRecord:
    active = sessions.active_session(conn, channel, chat_id)
    if active is None:
        active = sessions.ensure_active_session(conn, channel, chat_id, base_id)
    sessions.rename_session(conn, active.id, title)
    return active


def _own(
    conn: sqlite3.Connection, channel: str, chat_id: str, session_id: str
) -> SessionRecord | None:
    """The session `session_id` if it is this conversation's."""
    record = sessions.get_session(conn, session_id)
    if record is None or (record.channel, record.chat_id) != (channel, chat_id):
        return None
    return record


def archive_session(
    conn: sqlite3.Connection,
    channel: str,
    chat_id: str,
    base_id: str,
    session_id: str | None = None,
) -> Replaced | None:
    """Archive the session `session_id` (default: the active one); a fresh
    session replaces it if it was the active one. None if none matches."""
    active = sessions.active_session(conn, channel, chat_id)
    target = active if session_id is None else _own(conn, channel, chat_id, session_id)
    if target is None:
        return None
    sessions.set_session_status(conn, target.id, SessionStatus.ARCHIVED)
    fresh = None
    if active is not None and target.id == active.id:
        fresh = sessions.create_next_session(conn, channel, chat_id, base_id)
    return Replaced(target, fresh)


def delete_session(
    conn: sqlite3.Connection,
    channel: str,
    chat_id: str,
    base_id: str,
    ref: str | None,
    session_id: str | None = None,
) -> Replaced | None:
    """Delete the session `ref` names, or `session_id` exactly (default: the
    active one) for good, with its sub-agents' transcripts; a fresh session
    replaces it if it was the active one. None if none matches."""
    active = sessions.active_session(conn, channel, chat_id)
    if session_id is not None:
        target = _own(conn, channel, chat_id, session_id)
    elif ref:
        target = find_session(sessions.list_sessions(conn, channel, chat_id), ref)
    else:
        target = active
    if target is None:
        return None
    for child in subagents.children_of(conn, target.id):
        sessions.delete_session(conn, child.id)
    sessions.delete_session(conn, target.id)
    fresh = None
    if active is not None and target.id == active.id:
        fresh = sessions.create_next_session(conn, channel, chat_id, base_id, after=target.id)
    return Replaced(target, fresh)


def recent_history(
    conn: sqlite3.Connection, channel: str, chat_id: str, session_id: str | None, limit: int
) -> RecentHistory | None:
    """`session_id` (None: the active one) of this conversation only; None if
    the conversation has no session by that id."""
    if session_id is None:
        record = sessions.active_session(conn, channel, chat_id)
        if record is None:
            return RecentHistory(None, [], False)
    else:
        record = sessions.get_session(conn, session_id)
        if record is None or (record.channel, record.chat_id) != (channel, chat_id):
            return None
    recent, more = messages.load_recent(conn, record.id, record.segment, limit)
    return RecentHistory(record, recent, more)


def session_stats(conn: sqlite3.Connection, channel: str, chat_id: str) -> SessionStats | None:
    """Size of the active session's history and the session's tokens, counted
    by SQLite: cheap even for many thousands of messages (nothing is loaded
    into Python)."""
    record = sessions.active_session(conn, channel, chat_id)
    if record is None:
        return None
    sql = _SIZE_POSTGRES if is_postgres(conn) else _SIZE
    row = conn.execute(sql, (record.id, record.segment, Marker.FAILED_TURN.value)).fetchone()
    return SessionStats(record, int(row[0]), int(row[1]), _token_totals(conn, record.id))


# A compaction copies the kept rows (usage included) into the new segment;
# a copy keeps its created_at, so each message is counted once per group.
_TOKENS = (
    "SELECT COALESCE(SUM(i), 0), COALESCE(SUM(o), 0), COALESCE(SUM(r), 0), COALESCE(SUM(w), 0)"
    " FROM (SELECT json_extract(usage, '$.input_tokens') AS i,"
    " json_extract(usage, '$.output_tokens') AS o,"
    " json_extract(usage, '$.cache_read_tokens') AS r,"
    " json_extract(usage, '$.cache_write_tokens') AS w"
    " FROM messages WHERE session_id = ? AND usage IS NOT NULL"
    " GROUP BY created_at, role, usage) AS u"
)
_TOKENS_POSTGRES = (
    "SELECT COALESCE(SUM(i), 0), COALESCE(SUM(o), 0), COALESCE(SUM(r), 0), COALESCE(SUM(w), 0)"
    " FROM (SELECT CAST(CAST(usage AS jsonb) ->> 'input_tokens' AS bigint) AS i,"
    " CAST(CAST(usage AS jsonb) ->> 'output_tokens' AS bigint) AS o,"
    " CAST(CAST(usage AS jsonb) ->> 'cache_read_tokens' AS bigint) AS r,"
    " CAST(CAST(usage AS jsonb) ->> 'cache_write_tokens' AS bigint) AS w"
    " FROM messages WHERE session_id = ? AND usage IS NOT NULL"
    " GROUP BY created_at, role, usage) AS u"
)
# the active history's size in characters: content, reasoning, tool-call arguments
_SIZE = (
    "SELECT COUNT(*), COALESCE(SUM(LENGTH(content) + COALESCE(LENGTH(reasoning_content), 0)"
    " + (SELECT COALESCE(SUM(LENGTH(json_extract(t.value, '$.arguments'))), 0)"
    "    FROM json_each(COALESCE(tool_calls, '[]')) AS t)), 0)"
    " FROM messages WHERE session_id = ? AND segment = ? AND marker IS NOT ?"
)
_SIZE_POSTGRES = (
    "SELECT COUNT(*), COALESCE(SUM(LENGTH(content) + COALESCE(LENGTH(reasoning_content), 0)"
    " + (SELECT COALESCE(SUM(LENGTH(t.value ->> 'arguments')), 0)"
    "    FROM jsonb_array_elements(CAST(COALESCE(tool_calls, '[]') AS jsonb)) AS t)), 0)"
    " FROM messages WHERE session_id = ? AND segment = ? AND marker IS NOT ?"
)


def _token_totals(conn: sqlite3.Connection, session_id: str) -> Usage:
    row = conn.execute(_TOKENS_POSTGRES if is_postgres(conn) else _TOKENS, (session_id,)).fetchone()
    return Usage(int(row[0]), int(row[1]), int(row[2]), int(row[3]))
