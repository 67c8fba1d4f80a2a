"""The context builder: the one place that decides what the model sees.

A request's messages are assembled from ordered parts:

1. the operator's `system_prompt` (config; sent first, never persisted);
2. per-turn injected blocks (`ContextPart`s: the skill index, the memory
   summary …), rendered once when the turn starts and sent on every call of
   that turn, never persisted;
3. the history — which begins with the agent prompt (AGENT.md). That prompt
   *is* persisted: `AgentPromptPolicy.check` decides, when a turn opens,
   whether it is due (a new or reset history, or every N user turns);
4. tool results of earlier turns trimmed to `tool_result_trim_chars`.

It takes neutral input (`TurnFacts`, `ChatMessage`s) and never imports the
gateway, channels or storage.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from agent.messages import ChatMessage, Marker, Role
from agent.prompt_file import agent_prompt_message, needs_injection

__all__ = [
    "AgentPromptPolicy",
    "ContextBuilder",
    "ContextPart",
    "ContextSettings",
    "PreparedContext",
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


@dataclass(frozen=True, slots=True)
class PreparedContext:
    """A turn's fixed parts, ready to put in front of the history on each call."""

    prefix: tuple[ChatMessage, ...]
    trim_chars: int

    def messages(self, history: Sequence[ChatMessage], turn_start: int) -> list[ChatMessage]:
        """What the model sees: the prefix, earlier turns with long tool results
        trimmed, then this turn (from `turn_start`) whole."""
        limit = self.trim_chars
        tool = Role.TOOL
        older = [
            _trimmed(m, limit) if m.role is tool and len(m.content) > limit else m
            for m in history[:turn_start]
        ]
        return [*self.prefix, *older, *history[turn_start:]]


class ContextBuilder:
    def __init__(self, settings: ContextSettings, parts: Sequence[ContextPart] = ()) -> None:
        self.settings = settings
        self.parts = tuple(parts)
        base = [ChatMessage.system(settings.system_prompt)] if settings.system_prompt else []
        self._static = PreparedContext(tuple(base), settings.tool_result_trim_chars)

    async def prepare(self, turn: TurnFacts) -> PreparedContext:
        """Render the injected blocks once for the turn."""
        if not self.parts:
            return self._static
        blocks = list(self._static.prefix)
        for part in self.parts:
            text = await part.render(turn)
            if text:
                blocks.append(ChatMessage.system(text, part.marker))
        return PreparedContext(tuple(blocks), self.settings.tool_result_trim_chars)
