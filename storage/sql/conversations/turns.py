"""A turn's units of work: open it, append to it, finish it.

Each function runs inside one transaction on the storage thread (through
`storage.store.Store`). The runtime decides *what* a turn stores; these
functions decide *how*, so the runtime holds no SQL.

- `begin_turn`: the session (active, fresh, or the one a recovered turn
  started in; an active one idle past the opening's `SessionReset` cutoff is
  archived and replaced, with a notice for the chat queued in the outbox),
  its active history, the repair of dangling tool calls, the
  agent prompt if the caller's check says it is due, the new messages, and
  the inbox rows → `started`.
- `DeferredOpening.store`: the same for a turn that opened from a cached
  history; it first checks that the session is still where the cache says
  and raises `StaleTurn` if not.
- `finish_turn`: the final assistant message, then `inbox.answer` (the reply's
  outbox row and the inbox rows → `done`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from agent.messages import ChatMessage, HistorySize, repair_dangling_tool_calls
from gateway.bus import OutboundMessage
from storage.clock import iso
from storage.sql.conversations import messages, sessions
from storage.sql.conversations.history_window import load_window
from storage.sql.conversations.sessions import SessionRecord
from storage.sql.delivery import inbox, outbox

__all__ = [
    "Begun",
    "CachedHistory",
    "DeferredOpening",
    "Opening",
    "PromptCheck",
    "SessionReset",
    "StaleTurn",
    "append_turn",
    "begin_turn",
    "close_broken",
    "finish_turn",
]


class StaleTurn(Exception):
    """A turn opened from the cache found the session changed underneath it."""


@dataclass(frozen=True, slots=True)
class SessionReset:
    """Replace the active session if it was last active before `before`."""

    before: datetime
    notice: str  # told to the chat when it happens ("": nothing)

    def due(self, last_active: str) -> bool:
        return last_active < iso(self.before)  # both fixed-width UTC text


@dataclass(frozen=True, slots=True)
class Opening:
    """What a turn asks storage to open."""

    channel: str
    chat_id: str
    base_id: str  # the id a new session of this conversation is named after
    session_id: str | None  # resume in this session (a recovered turn)
    fresh: bool  # start a new session first
    new: tuple[ChatMessage, ...]  # empty when resuming
    inbox_ids: tuple[int, ...]
    run_id: str
    reset: SessionReset | None = None  # only for the conversation's active session
    # tools whose dangling calls (in the last tool-calling message) are left for
    # the resumed turn to run again rather than answered "[interrupted]"
    rerun: frozenset[str] = frozenset()
    # read no more of a long segment than this (storage.sql.conversations.history_window); None: all
    budget_chars: int | None = None


@dataclass(frozen=True, slots=True)
class CachedHistory:
    """A session's active history as the runtime kept it after a turn."""

    session_id: str
    segment: int
    next_seq: int
    history: list[ChatMessage]


# Given the history and the session as stored: the agent prompt to add before
# the new messages, or None when none is due.
PromptCheck = Callable[[list[ChatMessage], SessionRecord], ChatMessage | None]


@dataclass(frozen=True, slots=True)
class Begun:
    record: SessionRecord  # as it was before this call's writes
    history: list[ChatMessage]  # with the added messages
    repaired: int
    injected: bool
    archived: SessionRecord | None = None  # the session the reset replaced
    notice: tuple[OutboundMessage, int] | None = None  # its outbox row, to hand over
    # the whole segment's size with the added messages; None when the history
    # came from the cache (whose owner knows its size)
    size: HistorySize | None = None


def begin_turn(
    conn: sqlite3.Connection,
    opening: Opening,
    *,
    cached: CachedHistory | None = None,
    prompt: PromptCheck | None = None,
) -> Begun:
    if opening.session_id is not None:
        record = sessions.get_session(conn, opening.session_id)
    elif opening.fresh:
        record = sessions.create_next_session(
            conn, opening.channel, opening.chat_id, opening.base_id
        )
    else:
        record = None
    archived = notice = None
    if record is None:
        record = sessions.ensure_active_session(
            conn, opening.channel, opening.chat_id, opening.base_id
        )
        reset = opening.reset
        # next_seq > 1: a session without a message has nothing to leave behind
        if reset is not None and record.next_seq > 1 and reset.due(record.updated_at):
            sessions.set_session_status(conn, record.id, sessions.SessionStatus.ARCHIVED)
            archived = record
            record = sessions.create_next_session(
                conn, opening.channel, opening.chat_id, opening.base_id
            )
            notice = _queue_notice(conn, opening, reset, record)
    current = (record.id, record.segment, record.next_seq)
    if cached is not None and (cached.session_id, cached.segment, cached.next_seq) == current:
        history = list(cached.history)
        added: list[ChatMessage] = []  # cached only after a turn that ended whole
        size = None
    else:
        history, size = load_window(conn, record.id, record.segment, opening.budget_chars)
        added = repair_dangling_tool_calls(history, rerun=opening.rerun)
    repaired = len(added)
    injected = False
    if opening.new:
        agent_prompt = prompt(history, record) if prompt is not None else None
        if agent_prompt is not None:
            added.append(agent_prompt)
            injected = True
        added.extend(opening.new)
    if added:
        messages.append_messages(conn, record.id, added, opening.run_id, user_turn_prompt=injected)
    if opening.new:
        inbox.mark_started(conn, opening.inbox_ids, record.id)
    if size is not None:
        size = size.plus(added)
    return Begun(record, history + added, repaired, injected, archived, notice, size)


def _queue_notice(
    conn: sqlite3.Connection, opening: Opening, reset: SessionReset, fresh: SessionRecord
) -> tuple[OutboundMessage, int] | None:
    """The chat's notice of the new session: an outbox row in the reset's
    commit, so it is told exactly once even if the turn is then interrupted."""
    if not reset.notice:
        return None
    # no run_id in its metadata: it must not take over the turn's streamed message
    message = OutboundMessage(opening.channel, opening.chat_id, reset.notice, session_id=fresh.id)
    return message, outbox.enqueue(conn, message)


@dataclass(frozen=True, slots=True)
class DeferredOpening:
    """What a turn opened in memory has still to store, in its first write."""

    opening: Opening
    expected: CachedHistory

    def store(
        self, conn: sqlite3.Connection, more: Sequence[ChatMessage], *, finishing: bool
    ) -> None:
        """The new messages and `more` after them, in one append; inbox rows →
        `started` unless the turn is finishing in this same transaction."""
        opening, expected = self.opening, self.expected
        position = messages.bound_position(
            conn, opening.channel, opening.chat_id, expected.session_id
        )
        if position is None or position[:2] != (expected.segment, expected.next_seq):
            raise StaleTurn(
                f"expected {expected.session_id} at seq {expected.next_seq}, found {position}"
            )
        messages.append_messages(
            conn, expected.session_id, [*opening.new, *more], opening.run_id, position=position
        )
        if not finishing:
            inbox.mark_started(conn, opening.inbox_ids, expected.session_id)


def append_turn(
    conn: sqlite3.Connection,
    session_id: str,
    run_id: str,
    new: Sequence[ChatMessage],
    deferred: DeferredOpening | None,
    *,
    finishing: bool = False,
) -> None:
    """Messages produced mid-turn, after the deferred opening if there is one."""
    if deferred is not None:
        deferred.store(conn, new, finishing=finishing)
    elif new:
        messages.append_messages(conn, session_id, new, run_id)


def finish_turn(
    conn: sqlite3.Connection,
    session_id: str,
    run_id: str,
    reply: ChatMessage | None,
    deferred: DeferredOpening | None,
    out: OutboundMessage | None,
    inbox_ids: Sequence[int],
    *,
    failed: bool = False,
) -> int | None:
    """The final assistant message, the reply's outbox row and inbox → done;
    the outbox row's id (None when nothing is sent). `failed`: the turn's
    messages are left out of later histories (`messages.mark_failed_run`)."""
    append_turn(conn, session_id, run_id, [reply] if reply else [], deferred, finishing=True)
    if failed:
        messages.mark_failed_run(conn, session_id, run_id)
    return inbox.answer(conn, inbox_ids, out)


def close_broken(
    conn: sqlite3.Connection, run_id: str, inbox_ids: Sequence[int], out: OutboundMessage | None
) -> int | None:
    """Close the inbox rows of a turn that broke (gateway.turns.execution) with `out`
    as a failed turn closes: the messages its run stored stay, out of later
    histories. Rows already done (it broke after its answer was committed)
    stay as they are, and nothing is queued: None."""
    marks = ",".join("?" * len(inbox_ids))
    rows = conn.execute(
        f"SELECT id, session_id FROM inbox WHERE id IN ({marks}) AND state != 'done'",
        tuple(inbox_ids),
    ).fetchall()
    if not rows:
        return None
    for session_id in {r["session_id"] for r in rows if r["session_id"] is not None}:
        messages.mark_failed_run(conn, session_id, run_id)
    return inbox.answer(conn, [r["id"] for r in rows], out)
