"""The operator's reads of conversations (the console's Conversations view):
sessions across every channel, found by channel, user and text a page at a
time, and a session's whole transcript (every segment, each message once)
a page at a time. Read-only; sync functions for `Database.read`.

Bounded: a page holds at most `MAX_PAGE` sessions or `MAX_ROWS` messages,
message texts are cut at `TEXT_CHARS` by the database, and a text search is
a `LIKE` (wildcards in the text escaped) over the messages' content, at most
`MAX_QUERY_CHARS` long.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from agent.messages import ChatMessage, Marker
from storage.sql.conversations import sessions
from storage.sql.conversations.messages import message_from_row, plain_rows
from storage.sql.conversations.sessions import SessionRecord
from storage.sql.conversations.subagents import CHILD_CHANNEL, children_of

__all__ = [
    "MAX_PAGE",
    "MAX_QUERY_CHARS",
    "MAX_ROWS",
    "TEXT_CHARS",
    "Found",
    "SessionQuery",
    "SessionRow",
    "Transcript",
    "TranscriptEntry",
    "find_sessions",
    "like_pattern",
    "transcript",
]

MAX_PAGE: Final = 100  # sessions in one page of a search
MAX_ROWS: Final = 300  # messages in one page of a transcript
MAX_QUERY_CHARS: Final = 200  # of a text searched for
TEXT_CHARS: Final = 8_000  # of one message's content, read
PREVIEW_CHARS: Final = 160  # of the last user message shown beside a session

_COLUMNS = (
    "s.id, s.channel, s.chat_id, s.title, s.status, s.segment, s.next_seq, s.user_turns, "
    "s.prompt_turn, s.compacted_at, s.created_at, s.updated_at"
)


@dataclass(frozen=True, slots=True)
class SessionQuery:
    """Which sessions: all but sub-agents' by default (a sub-agent's transcript
    is read through its parent's), newest activity first."""

    channel: str | None = None  # exactly this channel (`subagent` lists sub-agents)
    user: str | None = None  # the chat id, its owner or a sender of its messages, exactly
    # in the title, or the content of a message that is not the gateway's
    # own prompt (a compaction's summary is searched), case-insensitively
    text: str | None = None
    limit: int = 50
    after: tuple[str, str] | None = None  # (updated_at, id) of the last one already shown


@dataclass(frozen=True, slots=True)
class SessionRow:
    record: SessionRecord  # with the active history's message count
    current: bool  # the session its chat is bound to (new messages go there)
    owner: str | None  # the chat's owner (WebSocket chats: the principal)
    preview: str | None  # the newest user message of the active history, cut


@dataclass(frozen=True, slots=True)
class Found:
    rows: list[SessionRow]
    after: tuple[str, str] | None  # where the next page starts; None: no more


@dataclass(frozen=True, slots=True)
class TranscriptEntry:
    message: ChatMessage  # content cut at TEXT_CHARS
    run_id: str | None
    segment: int
    cut: bool  # the content is longer than shown


@dataclass(frozen=True, slots=True)
class Transcript:
    record: SessionRecord
    current: bool
    owner: str | None
    entries: list[TranscriptEntry]  # oldest first; a compaction's copies left out
    before: int | None  # the seq to read older messages before; None: none older
    children: list[SessionRecord]  # its sub-agents' sessions


def like_pattern(text: str) -> str:
    """`text` anywhere, for `LIKE ? ESCAPE '\\'`, its own `%`, `_` and `\\`
    taken literally; lower case (compared with LOWER(column))."""
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def find_sessions(conn: sqlite3.Connection, query: SessionQuery) -> Found:
    where: list[str] = []
    params: list[object] = []
    if query.channel is None:
        where.append("s.channel != ?")
        params.append(CHILD_CHANNEL)
    else:
        where.append("s.channel = ?")
        params.append(query.channel)
    if query.user is not None:
        # inbox rows are indexed by (channel, chat_id, ...): no scan of the inbox
        where.append(
            "(s.chat_id = ? OR o.owner = ? OR EXISTS (SELECT 1 FROM inbox i "
            "WHERE i.channel = s.channel AND i.chat_id = s.chat_id AND i.sender_id = ?))"
        )
        params += [query.user] * 3
    if query.text is not None:
        pattern = like_pattern(query.text[:MAX_QUERY_CHARS])
        where.append(
            "(LOWER(COALESCE(s.title, '')) LIKE ? ESCAPE '\\' OR EXISTS (SELECT 1 FROM messages m "
            "WHERE m.session_id = s.id AND (m.role != 'system' OR m.marker = ?) "
            "AND LOWER(m.content) LIKE ? ESCAPE '\\'))"
        )
        params += [pattern, Marker.HISTORY_COMPACTION.value, pattern]
    if query.after is not None:
        where.append("(s.updated_at < ? OR (s.updated_at = ? AND s.id > ?))")
        params += [query.after[0], query.after[0], query.after[1]]
    limit = max(1, min(query.limit, MAX_PAGE))
    rows = conn.execute(
        f"SELECT {_COLUMNS}, "
        "(SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id "
        "AND m.segment = s.segment) AS n, "
        f"(SELECT substr(m.content, 1, {PREVIEW_CHARS}) FROM messages m WHERE m.session_id = s.id "
        "AND m.segment = s.segment AND m.role = 'user' ORDER BY m.seq DESC LIMIT 1) AS preview, "
        "b.session_id AS bound, o.owner AS owner "
        "FROM sessions s "
        "LEFT JOIN chat_bindings b ON b.channel = s.channel AND b.chat_id = s.chat_id "
        "AND b.session_id = s.id "
        "LEFT JOIN chat_owners o ON o.channel = s.channel AND o.chat_id = s.chat_id "
        f"WHERE {' AND '.join(where)} ORDER BY s.updated_at DESC, s.id LIMIT ?",
        (*params, limit + 1),
    ).fetchall()
    found = [
        SessionRow(
            sessions.record_from_row(r, r["n"]), r["bound"] is not None, r["owner"], r["preview"]
        )
        for r in rows[:limit]
    ]
    after = None
    if len(rows) > limit:
        last = found[-1].record
        after = (last.updated_at, last.id)
    return Found(found, after)


# SELECT_MESSAGES's columns (content cut), then the segment and the length
_ENTRY = (
    f"SELECT role, substr(content, 1, {TEXT_CHARS}), tool_calls, tool_call_id, name, "
    "reasoning_content, media, marker, usage, created_at, seq, run_id, segment, LENGTH(content) "
    "FROM messages "
)


def transcript(
    conn: sqlite3.Connection, session_id: str, before: int | None, limit: int
) -> Transcript | None:
    """The newest `limit` messages of the session before seq `before` (all
    of them: None), oldest first; None if there is no such session.

    A compaction starts a new segment with copies of what it kept (and of
    what was written while it summarised): those copies are left out, so
    each message is shown once, where it was written, and each summary
    (marker HISTORY_COMPACTION) where its compaction happened."""
    record = sessions.get_session(conn, session_id)
    if record is None:
        return None
    limit = max(1, min(limit, MAX_ROWS))
    rows = plain_rows(
        conn,
        _ENTRY + "WHERE session_id = ? AND seq < ? ORDER BY segment DESC, seq DESC LIMIT ?",
        (session_id, before if before is not None else record.next_seq, limit + 1),
    )
    more = len(rows) > limit
    rows = rows[:limit][::-1]
    copies = _copied(conn, session_id, {r[12] for r in rows if r[12] > 0})
    entries = [
        TranscriptEntry(message_from_row(r), r[11], r[12], r[13] > TEXT_CHARS)
        for r in rows
        if r[12] == 0 or _identity(r) not in copies[r[12]]
    ]
    bound = conn.execute(
        "SELECT 1 FROM chat_bindings WHERE channel = ? AND chat_id = ? AND session_id = ?",
        (record.channel, record.chat_id, record.id),
    ).fetchone()
    owner = conn.execute(
        "SELECT owner FROM chat_owners WHERE channel = ? AND chat_id = ?",
        (record.channel, record.chat_id),
    ).fetchone()
    return Transcript(
        _counted(conn, record),
        bound is not None,
        None if owner is None else str(owner[0]),
        entries,
        rows[0][10] if more and rows else None,
        [_counted(conn, child) for child in children_of(conn, record.id)],
    )


def _counted(conn: sqlite3.Connection, record: SessionRecord) -> SessionRecord:
    """`record` with its active history's message count."""
    count = conn.execute(
        "SELECT COUNT(*) FROM messages WHERE session_id = ? AND segment = ?",
        (record.id, record.segment),
    ).fetchone()
    return dataclasses.replace(record, message_count=int(count[0]))


# What a compaction's copy shares with the row it copied (made row for row,
# storage.sql.conversations.compaction): role, time, run and length.
Identity = tuple[Any, ...]


def _identity(row: Sequence[Any]) -> Identity:
    return (row[0], row[9], row[11], row[13])


def _copied(
    conn: sqlite3.Connection, session_id: str, segments: set[int]
) -> dict[int, set[Identity]]:
    """For each segment, the identities of the previous segment's rows: a
    row of the segment with one of them is a copy."""
    return {
        segment: set(
            plain_rows(
                conn,
                "SELECT role, created_at, run_id, LENGTH(content) FROM messages "
                "WHERE session_id = ? AND segment = ?",
                (session_id, segment - 1),
            )
        )
        for segment in segments
    }
