"""The `approvals` table: tool calls held for a person's yes, as units of work.

A row moves pending → approved | denied (a person, or the timeout) →
executing (approved calls about to run: committed first, so a crash never
runs them twice) → settled (the batch's results are in the session) → done
(the turn that carried on has its reply, or a newer turn took over). Every
move is conditional on the state it leaves, so two answers to one request
(a button and a command, a command and the timeout) decide it once.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from agent.messages import ChatMessage, ToolCall
from gateway.bus import InboundMessage, OutboundMessage
from storage.clock import iso, now_iso, parse_iso
from storage.sql.conversations import messages, turns
from storage.sql.conversations.turns import DeferredOpening
from storage.sql.delivery import inbox
from storage.sql.dialect import inserted_id

__all__ = [
    "ApprovalRecord",
    "ApprovalState",
    "NewApproval",
    "Paused",
    "close_broken",
    "finish_resumed",
    "get",
    "move",
    "open_approvals",
    "pause_turn",
    "settle",
    "stop",
]


class ApprovalState(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"
    EXECUTING = "executing"
    SETTLED = "settled"
    DONE = "done"


@dataclass(frozen=True, slots=True)
class NewApproval:
    session_id: str
    channel: str
    chat_id: str
    requester: str
    message: InboundMessage
    inbox_ids: tuple[int, ...]
    calls: tuple[ToolCall, ...]
    held: tuple[str, ...]  # call ids
    expires_at: datetime
    # the paused turn's run: the batch's results are stored as part of it, so a
    # later turn that fails (its messages hidden) cannot hide them too
    run_id: str


@dataclass(frozen=True, slots=True)
class ApprovalRecord(NewApproval):
    id: int
    state: ApprovalState
    approved: bool | None  # None until decided
    reason: str | None
    decided_by: str | None
    created_at: datetime


def _row(r: sqlite3.Row) -> ApprovalRecord:
    calls = tuple(ToolCall(c["id"], c["name"], c["arguments"]) for c in json.loads(r["calls"]))
    return ApprovalRecord(
        session_id=r["session_id"],
        channel=r["channel"],
        chat_id=r["chat_id"],
        requester=r["requester"],
        message=inbox.inbound_from_json(r["message"]),
        inbox_ids=tuple(json.loads(r["inbox_ids"])),
        calls=calls,
        held=tuple(json.loads(r["held"])),
        expires_at=parse_iso(r["expires_at"]),
        run_id=r["run_id"] or "",
        id=r["id"],
        state=ApprovalState(r["state"]),
        approved=None if r["decision"] is None else r["decision"] == "approve",
        reason=r["reason"],
        decided_by=r["decided_by"],
        created_at=parse_iso(r["created_at"]),
    )


def _insert(conn: sqlite3.Connection, new: NewApproval) -> int:
    now = now_iso()
    cursor = conn.execute(
        "INSERT INTO approvals (session_id, channel, chat_id, requester, message, inbox_ids, "
        "calls, held, state, created_at, expires_at, updated_at, run_id) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?) RETURNING id",
        (
            new.session_id,
            new.channel,
            new.chat_id,
            new.requester,
            inbox.inbound_to_json(new.message),
            json.dumps(list(new.inbox_ids)),
            json.dumps([c.to_dict() for c in new.calls], ensure_ascii=False),
            json.dumps(list(new.held)),
            now,
            iso(new.expires_at),
            now,
            new.run_id,
        ),
    )
    row_id = inserted_id(cursor)
    assert row_id is not None
    return row_id


def get(conn: sqlite3.Connection, *, approval_id: int) -> ApprovalRecord | None:
    r = conn.execute("SELECT * FROM approvals WHERE id = ?", (approval_id,)).fetchone()
    return _row(r) if r is not None else None


def open_approvals(conn: sqlite3.Connection) -> list[ApprovalRecord]:
    rows = conn.execute(  # at start; through the index, not past every decided row kept
        "SELECT * FROM approvals INDEXED BY approvals_open WHERE state != 'done' ORDER BY id"
    ).fetchall()
    return [_row(r) for r in rows]


def move(
    conn: sqlite3.Connection,
    *,
    approval_id: int,
    leaving: Sequence[ApprovalState],
    to: ApprovalState,
    approved: bool | None = None,
    reason: str | None = None,
    decided_by: str | None = None,
) -> bool:
    """`approval_id` → `to` if it is in one of `leaving`; whether it moved.
    `approved`, `reason`, `decided_by`: the decision, when this move makes it."""
    marks = ",".join("?" * len(leaving))
    decision = None if approved is None else ("approve" if approved else "deny")
    cursor = conn.execute(
        "UPDATE approvals SET state = ?, decision = COALESCE(?, decision), "
        "reason = COALESCE(?, reason), decided_by = COALESCE(?, decided_by), updated_at = ? "
        f"WHERE id = ? AND state IN ({marks})",
        (
            to.value,
            decision,
            reason,
            decided_by,
            now_iso(),
            approval_id,
            *(s.value for s in leaving),
        ),
    )
    return cursor.rowcount == 1


@dataclass(frozen=True, slots=True)
class Paused:
    approval_id: int
    prompt: OutboundMessage
    outbox_id: int


def pause_turn(
    conn: sqlite3.Connection,
    *,
    new: NewApproval,
    run_id: str,
    deferred: DeferredOpening | None,
    prompt: Callable[[int], OutboundMessage],
    previous: int | None,
) -> Paused:
    """A turn stops for approval, in one commit: what it had not stored yet,
    the approval row, the chat's request (`prompt(approval_id)`) as the
    answer of the turn's inbox rows, and the approval it resumed (if any) → done."""
    turns.append_turn(conn, new.session_id, run_id, [], deferred, finishing=True)
    approval_id = _insert(conn, new)
    message = prompt(approval_id)
    outbox_id = inbox.answer(conn, new.inbox_ids, message)
    assert outbox_id is not None
    if previous is not None:
        move(conn, approval_id=previous, leaving=tuple(ApprovalState), to=ApprovalState.DONE)
    return Paused(approval_id, message, outbox_id)


def settle(
    conn: sqlite3.Connection,
    *,
    approval_id: int,
    run_id: str,
    results: Sequence[ChatMessage],
    done: bool,
) -> bool:
    """The batch's results into its session and the row → settled (→ done
    when no turn carries on from it); False (nothing written) when another
    settle came first."""
    record = get(conn, approval_id=approval_id)
    leaving = (ApprovalState.APPROVED, ApprovalState.DENIED, ApprovalState.EXECUTING)
    if record is None or record.state not in leaving:
        return False
    if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (record.session_id,)).fetchone() is None:
        # the session was deleted meanwhile: nothing to carry on in
        return move(conn, approval_id=approval_id, leaving=leaving, to=ApprovalState.DONE)
    messages.append_messages(conn, record.session_id, results, record.run_id or run_id)
    to = ApprovalState.DONE if done else ApprovalState.SETTLED
    return move(conn, approval_id=approval_id, leaving=leaving, to=to)


def stop(
    conn: sqlite3.Connection,
    *,
    approval_id: int,
    run_id: str,
    results: Sequence[ChatMessage],
    out: OutboundMessage | None,
    inbox_ids: Sequence[int],
) -> int | None:
    """/stop while the approved calls ran, in one commit: their results
    ("[cancelled]") into the session, the row → done and `out` (the stop
    notice) as the answer of the stopped turn's `inbox_ids`; the outbox row's
    id (None: nothing sent, or the row was no longer executing)."""
    if not move(
        conn, approval_id=approval_id, leaving=[ApprovalState.EXECUTING], to=ApprovalState.DONE
    ):
        return None
    record = get(conn, approval_id=approval_id)
    assert record is not None
    if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (record.session_id,)).fetchone():
        messages.append_messages(conn, record.session_id, results, record.run_id or run_id)
    return inbox.answer(conn, inbox_ids, out) if inbox_ids else None


def close_broken(
    conn: sqlite3.Connection,
    *,
    approval_id: int,
    run_id: str,
    inbox_ids: Sequence[int],
    out: OutboundMessage | None,
) -> int | None:
    """`turns.close_broken` for a turn that carried on from an approval and
    broke (gateway.turns.execution). Its inbox rows were answered when it paused:
    the approval says whether it is still open. If so it is done now, whatever
    state it had reached, so that no start carries it on again, and `out`
    queued; if not (it broke after its answer was committed with it), nothing
    is: None."""
    unfinished = tuple(s for s in ApprovalState if s is not ApprovalState.DONE)
    if not move(conn, approval_id=approval_id, leaving=unfinished, to=ApprovalState.DONE):
        return None
    record = get(conn, approval_id=approval_id)
    if record is not None:
        messages.mark_failed_run(conn, record.session_id, run_id)
    return inbox.answer(conn, inbox_ids, out)


def finish_resumed(
    conn: sqlite3.Connection,
    *,
    approval_id: int,
    session_id: str,
    run_id: str,
    reply: ChatMessage | None,
    deferred: DeferredOpening | None,
    out: OutboundMessage | None,
    inbox_ids: Sequence[int],
    failed: bool = False,
) -> int | None:
    """`turns.finish_turn` for a turn that carried on from an approval, which
    is done in the same commit as the reply."""
    row_id = turns.finish_turn(
        conn, session_id, run_id, reply, deferred, out, inbox_ids, failed=failed
    )
    move(conn, approval_id=approval_id, leaving=tuple(ApprovalState), to=ApprovalState.DONE)
    return row_id
