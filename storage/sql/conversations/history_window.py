"""Opening a segment without reading all of it (a sync function for Database).

A turn that opens from storage needs the active history as the model can see
it, not the whole segment: a chat left uncompacted (compaction off, or a
session filled by an import) may hold tens of thousands of messages that
could never be sent anyway. `load_window` reads the segment from its
newest message back, only as far as the caller's budget reaches, in one
pass: the rows it measures are the ones it returns (nothing is decoded
before the cut is known, and nothing is read twice). When the whole segment
fits, that is all of it; otherwise the newest user turns that fit, behind
the latest agent prompt and compaction summary of the segment.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

from agent.messages import ChatMessage, HistorySize, Marker, Role, message_chars
from storage.sql.conversations.messages import (
    SELECT_MESSAGES,
    SIZED_COLUMNS,
    load_segment,
    message_from_row,
    messages_from_rows,
    plain_rows,
)

__all__ = ["LATEST_MARKED", "load_window"]

_IN_SEGMENT = "session_id = ? AND segment = ? AND marker IS NOT ?"
_NEWEST_FIRST = f"{SELECT_MESSAGES} WHERE {_IN_SEGMENT} ORDER BY seq DESC"
_USER = Role.USER.value
_HEAD_MARKERS = (Marker.AGENT_PROMPT.value, Marker.HISTORY_COMPACTION.value)
# (session_id, segment, marker, seq): index messages_by_marker, not a scan of
# the rows between a window's cut and the segment's start
LATEST_MARKED = (
    f"{SELECT_MESSAGES} WHERE session_id = ? AND segment = ? AND marker = ? "
    "AND seq < ? AND role = 'system' ORDER BY seq DESC LIMIT 1"
)


@dataclass(frozen=True, slots=True)
class _Scan:
    start: int | None  # the cut: the first seq kept; None when the whole segment fits
    chars: int  # read from the end back, past the budget
    user_turns: int  # among them
    rows: list[tuple[Any, ...]]  # from the cut (or the segment's start) on, in seq order


def load_window(
    conn: sqlite3.Connection, session_id: str, segment: int, budget_chars: int | None
) -> tuple[list[ChatMessage], HistorySize]:
    """The segment's history (failed turns left out) and its size.

    Within `budget_chars` (or with no budget) that is the whole segment, and
    its size. Otherwise: the latest agent prompt and compaction summary
    before the cut, then every message from the earliest user message whose
    turns, to the end, fit the budget (at least the last user turn), without
    tool results whose call was cut off; the size is then what the scan
    measured — more than the budget (so compaction is due) and at least all
    that was read (so a request built from it is never under-estimated).
    """
    if budget_chars is None:
        history = load_segment(conn, session_id, segment)
        return history, HistorySize.of(history)
    scan = _read_back(conn, (session_id, segment, Marker.FAILED_TURN.value), budget_chars)
    if scan.start is None:
        history = messages_from_rows(scan.rows)
        return history, HistorySize.of(history)
    latest = [_latest_before(conn, session_id, segment, m, scan.start) for m in _HEAD_MARKERS]
    head = sorted((m for m in latest if m is not None), key=lambda m: m.seq or 0)
    tail = messages_from_rows(scan.rows)
    called = {call.id for m in tail for call in m.tool_calls}
    tail = [m for m in tail if m.role is not Role.TOOL or m.tool_call_id in called]
    size = HistorySize(scan.chars + sum(message_chars(m) for m in head), scan.user_turns)
    return [*head, *tail], size


def _latest_before(
    conn: sqlite3.Connection, session_id: str, segment: int, marker: str, seq: int
) -> ChatMessage | None:
    """The segment's newest system message with `marker` before `seq` (index messages_by_marker)."""
    rows = plain_rows(conn, LATEST_MARKED, (session_id, segment, marker, seq))
    return message_from_row(rows[0]) if rows else None


def _read_back(conn: sqlite3.Connection, args: tuple[str, int, str], budget_chars: int) -> _Scan:
    """The segment's rows from the newest back until the budget is passed:
    the cut is the earliest user message from which the segment, to its end,
    fits (else the last user message), or none when the whole segment fits.
    A row's size is what agent.messages.message_chars counts, its tool calls
    as their JSON text."""
    start = None
    chars = turns = kept = 0
    read: list[tuple[Any, ...]] = []
    at_role, at_content, at_calls, at_reasoning, at_seq = SIZED_COLUMNS  # locals: every row
    newest_first = conn.cursor()
    newest_first.row_factory = None
    try:
        for row in newest_first.execute(_NEWEST_FIRST, args):
            role, seq = row[at_role], row[at_seq]
            reasoning, calls = row[at_reasoning], row[at_calls]
            chars += len(row[at_content]) + (len(reasoning) if reasoning else 0)
            chars += len(calls) if calls else 0
            if chars > budget_chars and start is not None:
                break
            read.append(row)
            if role == _USER:
                turns += 1
                start, kept = seq, len(read)
                if chars > budget_chars:  # the last user turn alone is over the budget
                    break
        else:
            return _Scan(None, chars, turns, read[::-1])
    finally:
        newest_first.close()
    return _Scan(start, chars, turns, read[kept - 1 :: -1])
