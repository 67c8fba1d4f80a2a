"""The atomic commit of a history compaction (a sync function for Database.write).

A compaction never deletes anything: it starts a new segment of the session
holding the compacted active history (kept system messages, the summary, the
recent turns) and leaves the old segment's rows in `messages` as the archive.
The commit is guarded: if the session moved on while the summary was being
written (another compaction, a reset, a new session segment), it raises
`CompactionConflict` and changes nothing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from agent.messages import ChatMessage
from storage.sql.conversations.messages import INSERT_MESSAGE, message_row

__all__ = ["CompactionConflict", "commit_compaction"]

_COPY = (
    "INSERT INTO messages (session_id, seq, segment, role, content, tool_calls, tool_call_id, "
    "name, reasoning_content, media, marker, usage, run_id, created_at) "
    "SELECT session_id, ?, ?, role, content, tool_calls, tool_call_id, name, "
    "reasoning_content, media, marker, usage, run_id, created_at "
    "FROM messages WHERE session_id = ? AND segment = ? AND seq = ?"
)


class CompactionConflict(Exception):
    """The session changed since the compaction was planned; nothing was written."""


def commit_compaction(
    conn: sqlite3.Connection,
    session_id: str,
    expected_segment: int,
    new_messages: Sequence[ChatMessage],
    compacted_at_iso: str,
    *,
    snapshot_last_seq: int | None = None,
) -> int:
    """Make `new_messages` the session's active history; returns the new segment.

    Messages that carry a `seq` (the kept ones, loaded from storage) are copied
    row for row from the old segment, so nothing about them is lost (run_id,
    exact content); a message without a `seq` (the summary) is inserted from
    its fields. New rows get fresh seqs from `sessions.next_seq`.

    With `snapshot_last_seq` (the seq of the last message the compaction saw),
    messages appended to the old segment after that snapshot — a turn that ran
    while the summary was being written — are copied after `new_messages`, so
    a background compaction never hides them.

    Raises `CompactionConflict` if the session is gone, its segment is no
    longer `expected_segment`, or a kept message is not in that segment.
    """
    row = conn.execute(
        "SELECT segment, next_seq FROM sessions WHERE id = ?", (session_id,)
    ).fetchone()
    if row is None:
        raise CompactionConflict(f"session {session_id!r} no longer exists")
    segment, next_seq = int(row[0]), int(row[1])
    if segment != expected_segment:
        raise CompactionConflict(
            f"session {session_id!r} is at segment {segment}, expected {expected_segment}"
        )
    new_segment = segment + 1
    seq = next_seq
    for message in new_messages:
        if message.seq is None:
            conn.execute(INSERT_MESSAGE, message_row(session_id, seq, new_segment, message, None))
        else:
            copied = conn.execute(_COPY, (seq, new_segment, session_id, segment, message.seq))
            if copied.rowcount != 1:
                raise CompactionConflict(
                    f"message seq {message.seq} is not in segment {segment} of {session_id!r}"
                )
        seq += 1
    if snapshot_last_seq is not None:
        later = conn.execute(
            "SELECT seq FROM messages WHERE session_id = ? AND segment = ? AND seq > ? "
            "ORDER BY seq",
            (session_id, segment, snapshot_last_seq),
        ).fetchall()
        for (old_seq,) in later:
            conn.execute(_COPY, (seq, new_segment, session_id, segment, old_seq))
            seq += 1
    conn.execute(
        "UPDATE sessions SET segment = ?, next_seq = ?, compacted_at = ?, updated_at = ? "
        "WHERE id = ?",
        (new_segment, seq, compacted_at_iso, compacted_at_iso, session_id),
    )
    return new_segment
