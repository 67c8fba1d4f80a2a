"""Opening a segment without reading all of it (a sync function for Database).

A turn that opens from storage needs the active history as the model can see
it, not the whole segment: a chat left uncompacted (compaction off, or a
session filled by an import) may hold tens of thousands of messages that
could never be sent anyway. `load_window` measures the segment in SQL (one
aggregate over the index) and, when it is larger than the caller's budget,
reads only the newest user turns that fit, behind the latest agent prompt
and compaction summary of the segment. The size it returns is the whole
segment's, so that compaction still sees how large the history really is.
"""

from __future__ import annotations

import sqlite3

from agent.messages import ChatMessage, HistorySize, Marker, Role
from storage.messages import load_segment, message_from_row

__all__ = ["load_window", "segment_size"]

# the SQL counterpart of agent.messages.message_chars (tool calls as their JSON text)
_CHARS = (
    "length(content) + coalesce(length(reasoning_content), 0) + coalesce(length(tool_calls), 0)"
)
_IN_SEGMENT = "session_id = ? AND segment = ? AND marker IS NOT ?"
_HEAD_MARKERS = (Marker.AGENT_PROMPT.value, Marker.HISTORY_COMPACTION.value)


def segment_size(conn: sqlite3.Connection, session_id: str, segment: int) -> HistorySize:
    row = conn.execute(
        f"SELECT coalesce(sum({_CHARS}), 0), coalesce(sum(role = 'user'), 0) "
        f"FROM messages WHERE {_IN_SEGMENT}",
        (session_id, segment, Marker.FAILED_TURN.value),
    ).fetchone()
    return HistorySize(int(row[0]), int(row[1]))


def load_window(
    conn: sqlite3.Connection, session_id: str, segment: int, budget_chars: int | None
) -> tuple[list[ChatMessage], HistorySize]:
    """The segment's history (failed turns left out) and the whole segment's size.

    Within `budget_chars` (or with no budget) that is the whole segment.
    Otherwise: the latest agent prompt and compaction summary before the cut,
    then every message from the earliest user message whose turns, to the
    end, fit the budget (at least the last user turn), without tool results
    whose call was cut off.
    """
    size = segment_size(conn, session_id, segment)
    if budget_chars is None or size.chars <= budget_chars:
        history = load_segment(conn, session_id, segment)
        return history, HistorySize.of(history)
    args = (session_id, segment, Marker.FAILED_TURN.value)
    row = conn.execute(
        "SELECT coalesce(min(CASE WHEN suffix <= ? THEN seq END), max(seq)) FROM ("
        f"SELECT seq, role, sum({_CHARS}) OVER (ORDER BY seq DESC) AS suffix "
        f"FROM messages WHERE {_IN_SEGMENT}) WHERE role = 'user'",
        (budget_chars, *args),
    ).fetchone()
    start = row[0] if row is not None and row[0] is not None else 0
    head_rows = conn.execute(
        f"SELECT * FROM messages WHERE {_IN_SEGMENT} AND seq < ? AND role = 'system' "
        "AND marker IN (?, ?) ORDER BY seq",
        (*args, start, *_HEAD_MARKERS),
    ).fetchall()
    latest = {r["marker"]: r for r in head_rows}  # the newest of each kind
    head = [message_from_row(r) for r in sorted(latest.values(), key=lambda r: r["seq"])]
    rows = conn.execute(
        f"SELECT * FROM messages WHERE {_IN_SEGMENT} AND seq >= ? ORDER BY seq", (*args, start)
    ).fetchall()
    tail = [message_from_row(r) for r in rows]
    called = {call.id for m in tail for call in m.tool_calls}
    tail = [m for m in tail if m.role is not Role.TOOL or m.tool_call_id in called]
    return [*head, *tail], size
