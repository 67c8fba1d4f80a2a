"""Opening a turn in one transaction.

The session (active, fresh or the one a recovered turn started in), its active
history, the repair of dangling tool calls, the AGENT.md decision, the new
system/user messages and the inbox rows → `started`: all one commit, so a turn
costs one storage round trip before the model is called. Histories of recent
sessions are kept in a small LRU and reused while the database says they are
still current (same segment, same next seq), so a long chat is not re-read on
every message.
"""

from __future__ import annotations

import dataclasses
import functools
import sqlite3
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from agent.messages import ChatMessage, repair_dangling_tool_calls
from agent.prompt_file import AgentPromptFile, agent_prompt_message, needs_injection
from storage import inbox, messages, sessions
from storage.db import Database
from storage.sessions import SessionRecord

__all__ = ["OpenedTurn", "TurnOpener"]


@dataclass(frozen=True, slots=True)
class _Cached:
    session_id: str
    segment: int
    next_seq: int
    history: list[ChatMessage]


@dataclass(frozen=True, slots=True)
class OpenedTurn:
    session_id: str
    segment: int
    history: list[ChatMessage]
    repaired: int


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
    record: SessionRecord
    history: list[ChatMessage]
    repaired: int
    needs_prompt: bool  # AGENT.md must go first: load it, then call again


def _begin(conn: sqlite3.Connection, *, req: _Request, prompt_text: str | None) -> _Begun:
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
        inject = req.every is not None and needs_injection(
            history, record.user_turns, record.prompt_turn, req.every
        )
        if inject and prompt_text is None:
            if added:
                messages.append_messages(conn, record.id, added, req.run_id)
            return _Begun(record, history + added, repaired, needs_prompt=True)
        if inject and prompt_text is not None:
            added.append(agent_prompt_message(prompt_text))
        added.extend(req.new)
    if added:
        messages.append_messages(conn, record.id, added, req.run_id, user_turn_prompt=inject)
    if req.new:
        inbox.mark_started(conn, req.inbox_ids, record.id)
    return _Begun(record, history + added, repaired, needs_prompt=False)


Conversation = tuple[str, str]


class TurnOpener:
    def __init__(
        self,
        db: Database,
        prompt_file: AgentPromptFile | None,
        reinject_every: int,
        *,
        capacity: int = 128,
    ) -> None:
        self.db = db
        self.prompt_file = prompt_file
        self.every = reinject_every if prompt_file is not None else None
        self.capacity = capacity
        self._cache: OrderedDict[Conversation, _Cached] = OrderedDict()

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
        begun = await self.db.write(functools.partial(_begin, req=req, prompt_text=None))
        repaired = begun.repaired
        if begun.needs_prompt:
            assert self.prompt_file is not None
            text = await self.prompt_file.load()
            record, history = begun.record, begun.history
            last = history[-1].seq if history and history[-1].seq is not None else None
            known = _Cached(
                record.id, record.segment, record.next_seq if last is None else last + 1, history
            )
            again = dataclasses.replace(req, session_id=record.id, fresh=False, cached=known)
            begun = await self.db.write(functools.partial(_begin, req=again, prompt_text=text))
        return OpenedTurn(begun.record.id, begun.record.segment, begun.history, repaired)

    def remember(self, channel: str, chat_id: str, turn: OpenedTurn) -> None:
        """Keep the turn's history (fully persisted, seqs assigned) for the next turn."""
        history = turn.history
        key = (channel, chat_id)
        if not history or history[-1].seq is None:
            self._cache.pop(key, None)
            return
        self._cache[key] = _Cached(turn.session_id, turn.segment, history[-1].seq + 1, history)
        self._cache.move_to_end(key)
        while len(self._cache) > self.capacity:
            self._cache.popitem(last=False)

    def forget(self, channel: str, chat_id: str) -> None:
        self._cache.pop((channel, chat_id), None)
