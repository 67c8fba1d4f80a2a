"""The context builder: the one place that decides what the model sees.

A request is ordered from the most to the least stable part, so that the
provider can cache the longest possible prefix (docs/caching.md):

1. the tool definitions (the registry's order; the loop sends them);
2. the operator's `system_prompt` (config; sent first, never persisted);
3. the history — which begins with the agent prompt (AGENT.md) and, after a
   compaction, the summary of the earlier turns; then the turns, appended to
   and never rewritten. AGENT.md *is* persisted: `AgentPromptPolicy.check`
   decides, when a turn opens, whether it is due (a new or reset history, or
   every N user turns), and a re-injection is stored before the latest user
   message, not put at the front. Tool results of earlier turns are trimmed
   to `tool_result_trim_chars`: a long result changes once, when its turn
   is over, and stays the same from then on;
4. per-turn injected blocks (`ContextPart`s: the skill index, the memory
   summary …), rendered once when the turn starts, sent after the history on
   every call of that turn (`PreparedContext.tail`), never persisted — what
   varies per turn never comes before the history.

It takes neutral input (`TurnFacts`, `ChatMessage`s) and never imports the
gateway, channels or storage.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from agent.messages import ChatMessage, Marker, Role
from agent.prompt_file import agent_prompt_message, needs_injection
from agent.window import fit

__all__ = [
    "AgentPromptPolicy",
    "ContextBuilder",
    "ContextPart",
    "ContextSettings",
    "PreparedContext",
    "TrimmedCopies",
    "TurnFacts",
]


@dataclass(frozen=True, slots=True)
class TurnFacts:
    """What a context part may know about the turn it renders for."""

    session_id: str
    channel: str
    chat_id: str
    sender_id: str
    agent: str
    private: bool = False  # a one-to-one chat (parts may say personal things there)


class ContextPart(Protocol):
    """A block injected into every request of a turn (e.g. the skill index)."""

    name: str
    marker: Marker | None

    async def render(self, turn: TurnFacts) -> str | None:
        """The block's text for this turn; None or "" to leave it out."""
        ...


@dataclass(frozen=True, slots=True)
class ContextSettings:
    system_prompt: str | None = None
    tool_result_trim_chars: int = 2_000


@dataclass(frozen=True, slots=True)
class AgentPromptPolicy:
    """When AGENT.md goes into a history: see `agent.prompt_file.needs_injection`."""

    every: int  # re-inject every N user turns; 0: only into a new or reset history

    def check(
        self, text: str | None, history: list[ChatMessage], user_turns: int, prompt_turn: int | None
    ) -> ChatMessage | None:
        """The agent-prompt message to store before the next user message, or None."""
        if text is None or not needs_injection(history, user_turns, prompt_turn, self.every):
            return None
        return agent_prompt_message(text)

    def due(self, history: list[ChatMessage], user_turns: int, prompt_turn: int | None) -> bool:
        return needs_injection(history, user_turns, prompt_turn, self.every)


def _cut(text: str, limit: int, what: str) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n…[{what} cut: {len(text) - limit} more characters]"


def cut_tool_result(text: str, limit: int) -> str:
    """A fresh tool result as the model gets it: at most `limit` characters."""
    return _cut(text, limit, "tool result")


def _trimmed(message: ChatMessage, limit: int) -> ChatMessage:
    return ChatMessage(
        Role.TOOL,
        _cut(message.content, limit, "old tool result"),
        tool_call_id=message.tool_call_id,
        name=message.name,
    )


_TRIMMED_KEPT = 4_096
_OLDER_KEPT = 64  # conversations whose last request's older turns are kept


class TrimmedCopies:
    """The trimmed copy of an old tool result, the same object every time:
    a conversation's requests then share their messages as the same objects
    turn after turn, which is what lets the provider reuse their encoding
    (agent.providers.openai_body)."""

    def __init__(self) -> None:
        self._by_id: dict[int, tuple[ChatMessage, ChatMessage]] = {}
        # by conversation: the messages last looked at, and what they became
        self._older: OrderedDict[str, tuple[list[ChatMessage], list[ChatMessage]]] = OrderedDict()

    def older(
        self, key: str | None, history: Sequence[ChatMessage], end: int, limit: int
    ) -> list[ChatMessage]:
        """`history[:end]` with tool results over `limit` characters trimmed.
        The conversation's last answer is kept: when what it was made from is
        still the start of `history` (compared in C), only the messages after
        it are looked at, so a long chat's turn does not walk its history."""
        source = history[:end] if isinstance(history, list) else list(history[:end])
        start, done = 0, []
        kept = self._older.pop(key, None) if key is not None else None
        if kept is not None and len(kept[0]) <= end and source[: len(kept[0])] == kept[0]:
            start, done = len(kept[0]), kept[1]
        tool = Role.TOOL
        out = done + [
            self.of(m, limit) if m.role is tool and len(m.content) > limit else m
            for m in source[start:]
        ]
        if key is not None:
            self._older[key] = (source, out)
            while len(self._older) > _OLDER_KEPT:
                self._older.popitem(last=False)
        return out

    def of(self, message: ChatMessage, limit: int) -> ChatMessage:
        hit = self._by_id.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        if len(self._by_id) >= _TRIMMED_KEPT:
            self._by_id.clear()
        copy = _trimmed(message, limit)
        self._by_id[id(message)] = (message, copy)  # the original kept: its id stays its own
        return copy


@dataclass(frozen=True, slots=True)
class PreparedContext:
    """A turn's fixed parts: `head` goes in front of the history on each
    call, `tail` after it; `cache_key` names the conversation for the
    provider's prompt cache."""

    head: tuple[ChatMessage, ...]
    trim_chars: int
    tail: tuple[ChatMessage, ...] = ()
    cache_key: str | None = None
    trimmed: TrimmedCopies = field(default_factory=TrimmedCopies)

    def messages(
        self,
        history: Sequence[ChatMessage],
        turn_start: int,
        budget_tokens: int | None = None,
        known_chars: int | None = None,
    ) -> list[ChatMessage]:
        """The cacheable part of a request: the head, earlier turns with long
        tool results trimmed, then this turn (from `turn_start`) whole; with
        `budget_tokens`, fitted to it with the tail (`agent.window.fit`;
        `known_chars`, at least the history's size, spares it measuring)."""
        older = self.trimmed.older(self.cache_key, history, turn_start, self.trim_chars)
        if budget_tokens is not None:
            current = history[turn_start:]
            return fit(self.head, older, current, self.tail, budget_tokens, known_chars)
        return [*self.head, *older, *history[turn_start:]]


class ContextBuilder:
    def __init__(self, settings: ContextSettings, parts: Sequence[ContextPart] = ()) -> None:
        self.settings = settings
        self.parts = tuple(parts)
        base = [ChatMessage.system(settings.system_prompt)] if settings.system_prompt else []
        self._head = tuple(base)
        self._trimmed = TrimmedCopies()

    async def prepare(self, turn: TurnFacts) -> PreparedContext:
        """Render the injected blocks once for the turn."""
        tail: list[ChatMessage] = []
        for part in self.parts:
            text = await part.render(turn)
            if text:
                tail.append(ChatMessage.system(text, part.marker))
        return PreparedContext(
            self._head,
            self.settings.tool_result_trim_chars,
            tuple(tail),
            turn.session_id,
            self._trimmed,
        )
