"""Opening a turn: the session, its history and the new messages.

Histories of recent conversations are kept in a small LRU after each turn that
ended whole. When the next message of such a conversation comes within ten
minutes and needs nothing but its user message stored (no AGENT.md injection,
no repair, no other session), the turn opens in memory: no storage round trip
before the model is called.
Storing the user message (and moving the inbox rows to `started`) is then
deferred to the turn's first write (`storage.sql.conversations.turns.DeferredOpening`), which
checks that the session is still the chat's active one, where the cache says;
if it is not, that write raises `StaleTurn` and the turn is run again from
the database.

A chat idle past its session-reset cutoff (gateway.turns.session_reset) never opens
from the cache: storage decides, by the session's last activity, whether a
new session begins.

Every other turn opens in one transaction: the session (active, fresh or the
one a recovered turn started in, or a new one replacing an idle one), its
active history, the repair of dangling
tool calls, the AGENT.md decision, the new messages and the inbox rows →
`started`. Whoever changes a conversation's sessions or history outside a turn
(commands, compaction) calls `forget`; a turn opened before that is not cached.

A session without a title gets one from its first user message
(`default_title`), stored as `/rename` stores it; `/new TITLE` and `/rename`
set their own.
"""

from __future__ import annotations

import functools
import itertools
import re
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from agent.compaction import CompactionResult
from agent.context import AgentPromptPolicy
from agent.messages import ChatMessage, HistorySize, Role
from agent.prompt_file import AgentPromptFile
from gateway.bus import OutboundMessage
from storage.clock import iso
from storage.sql.conversations.sessions import SessionRecord
from storage.sql.conversations.turns import CachedHistory, DeferredOpening, Opening, StaleTurn
from storage.store import Store

__all__ = ["OpenedTurn", "StaleTurn", "TurnOpener", "default_title"]

TITLE_MAX_CHARS = 40
# what the gateway puts around a user's words: "[Replying to: …]", "[1] ",
# "[Attached image: … at …]" (gateway.turns.replies)
_MARKUP = re.compile(r"^\[[^\]]*\]\s*")


def default_title(text: str) -> str | None:
    """A session's title from its first user message: its first line of the
    user's own words, whitespace collapsed, at most TITLE_MAX_CHARS characters."""
    for line in text.splitlines():
        words = " ".join(_MARKUP.sub("", line.strip()).split())
        if words:
            if len(words) <= TITLE_MAX_CHARS:
                return words
            return words[: TITLE_MAX_CHARS - 1].rstrip() + "…"
    return None


@dataclass(frozen=True, slots=True)
class _Cached:
    position: CachedHistory
    user_turns: int
    prompt_turn: int | None
    at: float  # time.monotonic() when cached
    last_active: datetime  # of the last message, as storage's updated_at counts it
    size: HistorySize  # of the whole active segment


@dataclass(slots=True)
class OpenedTurn:
    session_id: str
    segment: int
    history: list[ChatMessage]
    repaired: int
    user_turns: int  # the session's counters once this turn's user message is stored
    prompt_turn: int | None
    opened_at: int  # TurnOpener's clock, to tell whether it was forgotten since
    # set when the turn opened in memory: the turn's first write stores it,
    # then sets it to None
    deferred: DeferredOpening | None = None
    archived: str | None = None  # the idle session this turn's new one replaced
    notice: tuple[OutboundMessage, int] | None = None  # telling the chat so: its outbox row
    # the whole active segment's size when `history[:sized]` was counted: the
    # compaction decision is made from it (`size_now`), never by reloading
    size: HistorySize = field(default_factory=HistorySize)
    sized: int = 0
    compaction: CompactionResult | None = None  # made when a request overflowed

    def size_now(self) -> HistorySize:
        """The segment's size with what the turn appended since it was last counted."""
        if self.sized < len(self.history):
            self.size = self.size.plus(self.history[self.sized :])
            self.sized = len(self.history)
        return self.size


def user_message_seq(turn: OpenedTurn) -> int | None:
    """The seq of the turn's (last) user message: already assigned when the
    turn was opened in storage; for one opened in memory, where its first
    write will put it (memories record it as their source)."""
    last = next((m for m in reversed(turn.history) if m.role is Role.USER), None)
    if last is None or last.seq is not None or turn.deferred is None:
        return None if last is None else last.seq
    new = turn.deferred.opening.new
    index = next((i for i, m in enumerate(new) if m is last), None)
    return None if index is None else turn.deferred.expected.next_seq + index


def _user_turns(new: Sequence[ChatMessage]) -> int:
    return sum(1 for m in new if m.role is Role.USER)


def _prompt_check(
    policy: AgentPromptPolicy, text: str | None, history: list[ChatMessage], record: SessionRecord
) -> ChatMessage | None:
    return policy.check(text, history, record.user_turns, record.prompt_turn)


Conversation = tuple[str, str]


class TurnOpener:
    def __init__(
        self,
        store: Store,
        prompt_file: AgentPromptFile | None,
        reinject_every: int,
        *,
        capacity: int = 128,
        in_memory_for_secs: float = 600.0,
    ) -> None:
        self.store = store
        self.prompt_file = prompt_file
        self.policy = AgentPromptPolicy(reinject_every) if prompt_file is not None else None
        self.capacity = capacity
        self.in_memory_for_secs = in_memory_for_secs  # after a turn, for the next one
        self._cache: OrderedDict[Conversation, _Cached] = OrderedDict()
        self._clock = itertools.count()
        self._forgotten: OrderedDict[Conversation, int] = OrderedDict()
        self.opened_in_memory = 0

    async def open(self, opening: Opening) -> OpenedTurn:
        key = (opening.channel, opening.chat_id)
        cached = self._cache.get(key)
        opened_at = next(self._clock)
        if cached is not None and self._opens_in_memory(opening, cached):
            self.opened_in_memory += 1
            position = cached.position
            return OpenedTurn(
                position.session_id,
                position.segment,
                [*position.history, *opening.new],
                0,
                cached.user_turns + _user_turns(opening.new),
                cached.prompt_turn,
                opened_at,
                DeferredOpening(opening, position),
                size=cached.size,
                sized=len(position.history),
            )
        # off the cache the turn may well need AGENT.md (a new session, a due
        # re-injection): read it first, so the opening is one transaction
        prompt = None
        if self.prompt_file is not None and self.policy is not None and opening.new:
            text = await self.prompt_file.load()
            prompt = functools.partial(_prompt_check, self.policy, text)
        begun = await self.store.begin_turn(
            opening, cached.position if cached is not None else None, prompt
        )
        record = begun.record
        if opening.session_id is None and record.title is None and record.user_turns == 0:
            await self._name_session(opening)
        user_turns = record.user_turns + _user_turns(opening.new)
        size, sized = begun.size, len(begun.history)
        if size is None:  # storage took the cached history: its size is known here
            assert cached is not None
            size, sized = cached.size, len(cached.position.history)
        return OpenedTurn(
            record.id,
            record.segment,
            begun.history,
            begun.repaired,
            user_turns,
            user_turns if begun.injected else record.prompt_turn,
            opened_at,
            archived=begun.archived.id if begun.archived is not None else None,
            notice=begun.notice,
            size=size,
            sized=sized,
        )

    async def _name_session(self, opening: Opening) -> None:
        """The conversation's new session is named after its first message."""
        first = next((m for m in opening.new if m.role is Role.USER), None)
        title = default_title(first.content) if first is not None else None
        if title is not None:
            await self.store.rename_active(opening.channel, opening.chat_id, opening.base_id, title)

    def _opens_in_memory(self, opening: Opening, cached: _Cached) -> bool:
        """Only the user message to store: no resume, no new session, no AGENT.md."""
        if not opening.new or opening.session_id is not None or opening.fresh:
            return False
        if time.monotonic() - cached.at > self.in_memory_for_secs:
            return False  # a chat idle this long may have been archived meanwhile
        if opening.reset is not None and opening.reset.due(iso(cached.last_active)):
            return False  # idle past the reset cutoff: storage starts the new session
        return self.policy is None or not self.policy.due(
            cached.position.history, cached.user_turns, cached.prompt_turn
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
        position = CachedHistory(turn.session_id, turn.segment, history[-1].seq + 1, history)
        self._cache[key] = _Cached(
            position,
            turn.user_turns,
            turn.prompt_turn,
            time.monotonic(),
            history[-1].created_at,
            turn.size_now(),
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
