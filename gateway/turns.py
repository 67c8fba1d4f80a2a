"""Opening a turn: the session, its history and the new messages.

Histories of recent conversations are kept in a small LRU after each turn that
ended whole. When the next message of such a conversation comes within ten
minutes and needs nothing but its user message stored (no AGENT.md injection,
no repair, no other session), the turn opens in memory: no storage round trip
before the model is called.
Storing the user message (and moving the inbox rows to `started`) is then
deferred to the turn's first write (`DeferredOpening`), which checks that the
session is still the chat's active one, where the cache says; if it is not,
that write raises `StaleTurn` and the turn is run again from the database.

Every other turn opens in one transaction: the session (active, fresh or the
one a recovered turn started in), its active history, the repair of dangling
tool calls, the AGENT.md decision, the new messages and the inbox rows →
`started`. Whoever changes a conversation's sessions or history outside a turn
(commands, compaction) calls `forget`; a turn opened before that is not cached.
"""

from __future__ import annotations

import functools
import itertools
import sqlite3
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from agent.messages import ChatMessage, Role, repair_dangling_tool_calls
from agent.prompt_file import AgentPromptFile, agent_prompt_message, needs_injection
from storage import inbox, messages, sessions
from storage.db import Database
from storage.sessions import SessionRecord

__all__ = ["DeferredOpening", "OpenedTurn", "StaleTurn", "TurnOpener"]


class StaleTurn(Exception):
    """A turn opened from the cache found the session changed underneath it."""


@dataclass(frozen=True, slots=True)
class _Cached:
    session_id: str
    segment: int
    next_seq: int
    user_turns: int
    prompt_turn: int | None
    history: list[ChatMessage]
    at: float  # time.monotonic() when cached


@dataclass(slots=True)
class OpenedTurn:
    session_id: str
    segment: int
    history: list[ChatMessage]
    repaired: int
    user_turns: int  # the session's counters once this turn's user message is stored
    prompt_turn: int | None
    opened_at: int  # TurnOpener's clock, to tell whether it was forgotten since
    # set when the turn opened in memory: the turn's first write stores it
    # (ExecutionService.store), then sets it to None
    deferred: DeferredOpening | None = None


@dataclass(frozen=True, slots=True)
class _Request:
    channel: str
    chat_id: str
    base_id: str
    session_id: str | None  # resume in this session
    fresh: bool
    new: tuple[ChatMessage, ...]  # empty when resuming
    inbox_ids: tuple[int, ...]
    run_id: str
    every: int | None  # AGENT.md cadence; None: no prompt file
    cached: _Cached | None


@dataclass(frozen=True, slots=True)
class _Begun:
    record: SessionRecord  # as it was before this call's writes
    history: list[ChatMessage]
    repaired: int
    injected: bool


def _begin(conn: sqlite3.Connection, *, req: _Request, prompt_text: str | None) -> _Begun:
    """`prompt_text` is AGENT.md as just read; None when there is no prompt file."""
    if req.session_id is not None:
        record = sessions.get_session(conn, req.session_id)
    elif req.fresh:
        record = sessions.create_next_session(conn, req.channel, req.chat_id, req.base_id)
    else:
        record = None
    if record is None:
        record = sessions.ensure_active_session(conn, req.channel, req.chat_id, req.base_id)
    cached = req.cached
    current = (record.id, record.segment, record.next_seq)
    if cached is not None and (cached.session_id, cached.segment, cached.next_seq) == current:
        history = list(cached.history)
        added = []  # cached only after a turn that ended whole: nothing dangles
    else:
        history = messages.load_segment(conn, record.id, record.segment)
        added = repair_dangling_tool_calls(history)
    repaired = len(added)
    inject = False
    if req.new:
        inject = (
            req.every is not None
            and prompt_text is not None
            and needs_injection(history, record.user_turns, record.prompt_turn, req.every)
        )
        if inject and prompt_text is not None:
            added.append(agent_prompt_message(prompt_text))
        added.extend(req.new)
    if added:
        messages.append_messages(conn, record.id, added, req.run_id, user_turn_prompt=inject)
    if req.new:
        inbox.mark_started(conn, req.inbox_ids, record.id)
    return _Begun(record, history + added, repaired, injected=inject)


@dataclass(frozen=True, slots=True)
class DeferredOpening:
    """What a turn opened in memory has still to store, in its first write."""

    req: _Request
    expected: _Cached

    def store(
        self, conn: sqlite3.Connection, more: Sequence[ChatMessage], *, finishing: bool
    ) -> None:
        """The new messages and `more` after them, in one append; inbox rows →
        `started` unless the turn is finishing in this same transaction."""
        req, expected = self.req, self.expected
        position = messages.bound_position(conn, req.channel, req.chat_id, expected.session_id)
        if position is None or position[:2] != (expected.segment, expected.next_seq):
            raise StaleTurn(
                f"expected {expected.session_id} at seq {expected.next_seq}, found {position}"
            )
        messages.append_messages(
            conn, expected.session_id, [*req.new, *more], req.run_id, position=position
        )
        if not finishing:
            inbox.mark_started(conn, req.inbox_ids, expected.session_id)


def _user_turns(new: Sequence[ChatMessage]) -> int:
    return sum(1 for m in new if m.role is Role.USER)


Conversation = tuple[str, str]


class TurnOpener:
    def __init__(
        self,
        db: Database,
        prompt_file: AgentPromptFile | None,
        reinject_every: int,
        *,
        capacity: int = 128,
        in_memory_for_secs: float = 600.0,
    ) -> None:
        self.db = db
        self.prompt_file = prompt_file
        self.every = reinject_every if prompt_file is not None else None
        self.capacity = capacity
        self.in_memory_for_secs = in_memory_for_secs  # after a turn, for the next one
        self._cache: OrderedDict[Conversation, _Cached] = OrderedDict()
        self._clock = itertools.count()
        self._forgotten: OrderedDict[Conversation, int] = OrderedDict()
        self.opened_in_memory = 0

    async def open(
        self,
        *,
        channel: str,
        chat_id: str,
        base_id: str,
        resume_session: str | None,
        fresh: bool,
        new: Sequence[ChatMessage],
        inbox_ids: Sequence[int],
        run_id: str,
    ) -> OpenedTurn:
        req = _Request(
            channel,
            chat_id,
            base_id,
            resume_session,
            fresh,
            tuple(new),
            tuple(inbox_ids),
            run_id,
            self.every,
            self._cache.get((channel, chat_id)),
        )
        opened_at = next(self._clock)
        cached = req.cached
        if cached is not None and self._opens_in_memory(req, cached):
            self.opened_in_memory += 1
            return OpenedTurn(
                cached.session_id,
                cached.segment,
                [*cached.history, *req.new],
                0,
                cached.user_turns + _user_turns(req.new),
                cached.prompt_turn,
                opened_at,
                DeferredOpening(req, cached),
            )
        # off the cache the turn may well need AGENT.md (a new session, a due
        # re-injection): read it first, so the opening is one transaction
        text = await self.prompt_file.load() if self.prompt_file and req.new else None
        begun = await self.db.write(functools.partial(_begin, req=req, prompt_text=text))
        record = begun.record
        user_turns = record.user_turns + _user_turns(req.new)
        return OpenedTurn(
            record.id,
            record.segment,
            begun.history,
            begun.repaired,
            user_turns,
            user_turns if begun.injected else record.prompt_turn,
            opened_at,
        )

    def _opens_in_memory(self, req: _Request, cached: _Cached) -> bool:
        """Only the user message to store: no resume, no new session, no AGENT.md."""
        if not req.new or req.session_id is not None or req.fresh:
            return False
        if time.monotonic() - cached.at > self.in_memory_for_secs:
            return False  # a chat idle this long may have been archived meanwhile
        return self.every is None or not needs_injection(
            cached.history, cached.user_turns, cached.prompt_turn, self.every
        )

    def remember(self, channel: str, chat_id: str, turn: OpenedTurn) -> None:
        """Keep the turn's history (fully persisted, seqs assigned) for the next
        turn, unless the conversation was forgotten while the turn ran."""
        history = turn.history
        key = (channel, chat_id)
        if not history or history[-1].seq is None or turn.deferred is not None:
            self._cache.pop(key, None)
            return
        if self._forgotten.get(key, -1) > turn.opened_at:
            return
        self._cache[key] = _Cached(
            turn.session_id,
            turn.segment,
            history[-1].seq + 1,
            turn.user_turns,
            turn.prompt_turn,
            history,
            time.monotonic(),
        )
        self._cache.move_to_end(key)
        while len(self._cache) > self.capacity:
            self._cache.popitem(last=False)

    def forget(self, channel: str, chat_id: str) -> None:
        """The conversation's sessions or history changed outside a turn."""
        key = (channel, chat_id)
        self._cache.pop(key, None)
        self._forgotten[key] = next(self._clock)
        self._forgotten.move_to_end(key)
        while len(self._forgotten) > self.capacity:
            self._forgotten.popitem(last=False)
