"""Chat message types shared by the agent, the providers and storage.

A leaf module: it imports nothing from the project. Everything here is a plain
value object; persistence and wire mapping live elsewhere.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum

__all__ = [
    "CANCELLED_RESULT",
    "INTERRUPTED_RESULT",
    "ChatMessage",
    "HistorySize",
    "Marker",
    "Role",
    "ToolCall",
    "Usage",
    "message_chars",
    "pending_tool_calls",
    "repair_dangling_tool_calls",
    "settle_session_messages",
    "shared_prefix",
    "tokens_for_chars",
    "valid_arguments",
    "valid_unicode",
]


def valid_unicode(text: str) -> str:
    """`text` as UTF-8 can carry it. A service whose strings are UTF-16 (a
    JavaScript proxy) may cut a reply between the two halves of a surrogate
    pair (an emoji) and send each as an escape, in two events, or send half
    of one alone; json reads each half as a lone surrogate, which no store,
    frame or later request can encode. A pair comes back together as its
    character, a half alone becomes U+FFFD. (gateway.bus.storable does the
    same for what the channels bring in; the agent may not import it.)"""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


# the JSON escape of half a surrogate pair, which json reads as a lone surrogate
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def valid_arguments(text: str) -> str:
    """Tool-call arguments (`valid_unicode`) whose strings are valid Unicode
    once read, too: half a pair written as an escape is valid JSON, and json
    reads it as a lone surrogate, which no file, process, frame or store can
    encode. Such arguments are written again with U+FFFD in its place;
    any other text comes back as it came."""
    text = valid_unicode(text)
    if _SURROGATE_ESCAPE.search(text) is None:
        return text
    try:
        written = json.dumps(json.loads(text), ensure_ascii=False)
    except (ValueError, RecursionError):  # not JSON: the tool runner says so
        return text
    fixed = valid_unicode(written)
    return text if fixed is written else fixed


INTERRUPTED_RESULT = "[interrupted]"
CANCELLED_RESULT = "[cancelled]"


class Role(StrEnum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class Marker(StrEnum):
    """Labels on system messages that later stages must recognise."""

    AGENT_PROMPT = "agent_prompt"
    SCHEDULED_SYSTEM_PROMPT = "scheduled_system_prompt"
    HISTORY_COMPACTION = "SYSTEM_CONTEXT_HISTORY_COMPACTION"
    SKILL_INDEX = "skill_index"
    # on the user/assistant/tool messages of a turn that failed: kept for the
    # record, left out of the history later turns send to the model
    FAILED_TURN = "failed_turn"
    # the first message of a sub-agent's transcript: its type's filled template
    SUBAGENT_PROMPT = "subagent_prompt"
    # an assistant message the agent sent with send_session_message
    SESSION_MESSAGE = "session_message"


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text exactly as the model produced it

    def to_dict(self) -> dict[str, str]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens of one provider call (or a sum of calls). `input_tokens` is the
    whole prompt; the cache counts are the parts of it read from / written to
    the provider's prompt cache (the rest was processed uncached)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def uncached_input_tokens(self) -> int:
        return max(0, self.input_tokens - self.cache_read_tokens - self.cache_write_tokens)

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Usage:
        """From `to_dict` output; keys it does not know (or lacks) are ignored."""

        def count(key: str) -> int:
            value = data.get(key)
            return value if isinstance(value, int) else 0

        return cls(
            count("input_tokens"),
            count("output_tokens"),
            count("cache_read_tokens"),
            count("cache_write_tokens"),
        )

    def to_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
        }


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(slots=True)
class ChatMessage:
    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None  # tool name on tool results
    reasoning_content: str | None = None
    media: tuple[str, ...] = ()  # local file paths (images reach vision models)
    marker: str | None = None
    usage: Usage | None = None
    created_at: datetime = field(default_factory=_now)
    seq: int | None = None  # position in the session, assigned by storage

    @classmethod
    def system(cls, content: str, marker: str | None = None) -> ChatMessage:
        return cls(Role.SYSTEM, content, marker=marker)

    @classmethod
    def user(cls, content: str, media: tuple[str, ...] = ()) -> ChatMessage:
        return cls(Role.USER, content, media=media)

    @classmethod
    def tool_result(cls, call: ToolCall, content: str, media: tuple[str, ...] = ()) -> ChatMessage:
        """`media`: image files the result carries (an MCP tool's), for vision models."""
        return cls(Role.TOOL, content, tool_call_id=call.id, name=call.name, media=media)

    def tool_calls_json(self) -> str | None:
        if not self.tool_calls:
            return None
        return json.dumps([c.to_dict() for c in self.tool_calls], ensure_ascii=False)

    @staticmethod
    def parse_tool_calls(text: str | None) -> tuple[ToolCall, ...]:
        if not text:
            return ()
        return tuple(ToolCall(d["id"], d["name"], d["arguments"]) for d in json.loads(text))


def shared_prefix(new: list[ChatMessage], old: list[ChatMessage]) -> int:
    """How many leading messages `new` has in common with `old`. A list
    compares its items in C, `is` before `==`, so the usual case — an earlier
    request, less its last few messages (the per-turn tail), then more —
    costs a few passes at C speed, not a Python loop over a long history.
    (Equal messages are as good as the same ones: they are sent the same.)"""
    n = min(len(new), len(old))
    lo, hi = 0, n + 1  # new[:lo] == old[:lo]; new[:hi] differs (n + 1: not looked at)
    for k in range(n, max(n - 4, 0), -1):  # the end is where they usually part
        # the last item first: a prefix that ends in a different message is
        # told apart without copying two long slices to compare them
        if new[k - 1] == old[k - 1] and new[:k] == old[:k]:
            return k
        hi = k
    while hi - lo > 1:  # equal prefixes are nested: bisect the rest
        mid = (lo + hi) // 2
        if new[:mid] == old[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def message_chars(message: ChatMessage) -> int:
    """What the token estimate counts of a message: content, reasoning and
    tool calls (name + arguments)."""
    chars = len(message.content)
    if message.reasoning_content:
        chars += len(message.reasoning_content)
    for call in message.tool_calls:
        chars += len(call.name) + len(call.arguments)
    return chars


def tokens_for_chars(chars: int) -> int:
    """The token estimate for a character count: ceil(chars / 4 × 1.2), in integers."""
    return -(-chars * 3 // 10)


@dataclass(frozen=True, slots=True)
class HistorySize:
    """A running measure of an active history, kept as a turn runs so that the
    compaction decision never has to reload the history."""

    chars: int = 0
    user_turns: int = 0

    @classmethod
    def of(cls, messages: Sequence[ChatMessage]) -> HistorySize:
        return cls().plus(messages)

    def plus(self, messages: Sequence[ChatMessage]) -> HistorySize:
        if not messages:
            return self
        chars, turns = self.chars, self.user_turns
        for message in messages:
            chars += message_chars(message)
            if message.role is Role.USER:
                turns += 1
        return HistorySize(chars, turns)

    @property
    def tokens(self) -> int:
        return tokens_for_chars(self.chars)


def repair_dangling_tool_calls(
    history: list[ChatMessage],
    result: str = INTERRUPTED_RESULT,
    *,
    rerun: frozenset[str] = frozenset(),
) -> list[ChatMessage]:
    """Return the tool results missing from `history`, in call order.

    Providers reject a transcript where an assistant tool call has no result; a
    crash or cancellation between the two leaves exactly that. The caller
    persists what this returns and appends it. Calls of the last tool-calling
    message whose tool is in `rerun` are left unanswered: the caller runs them
    again (`pending_tool_calls`), e.g. a sub-agent resumed after a crash.
    """
    answered = {m.tool_call_id for m in history if m.role is Role.TOOL}
    last = next((m for m in reversed(history) if m.tool_calls), None)
    missing: list[ChatMessage] = []
    for message in history:
        for call in message.tool_calls:
            if message is last and call.name in rerun and call.id not in answered:
                continue
            if call.id not in answered:
                missing.append(ChatMessage.tool_result(call, result))
                answered.add(call.id)
    return missing


def pending_tool_calls(history: list[ChatMessage]) -> tuple[ToolCall, ...]:
    """Calls of the turn's last assistant message that have no result yet
    (left by `repair_dangling_tool_calls(rerun=...)` to be run again)."""
    for i in range(len(history) - 1, -1, -1):
        message = history[i]
        if message.role is Role.USER:
            return ()
        if message.role is Role.ASSISTANT and message.tool_calls:
            answered = {m.tool_call_id for m in history[i + 1 :] if m.role is Role.TOOL}
            return tuple(c for c in message.tool_calls if c.id not in answered)
    return ()


def settle_session_messages(history: list[ChatMessage]) -> list[ChatMessage]:
    """`history` with each `session_message` note that was stored while a tool
    batch ran (between the calls and their results: it is sent from inside a
    tool call) moved to just after the batch's results. Providers refuse
    anything between an assistant's tool calls and their results; storage
    keeps the real order."""
    if not any(m.marker == Marker.SESSION_MESSAGE for m in history):
        return history
    out: list[ChatMessage] = []
    held: list[ChatMessage] = []
    waiting: set[str] = set()  # call ids of the open batch without a result yet
    for message in history:
        if message.role is Role.TOOL and message.tool_call_id in waiting:
            out.append(message)
            waiting.discard(message.tool_call_id)
            if not waiting:
                out.extend(held)
                held.clear()
            continue
        if waiting and message.marker == Marker.SESSION_MESSAGE:
            held.append(message)
            continue
        out.extend(held)  # the batch never got all its results (repaired later)
        held.clear()
        waiting = {c.id for c in message.tool_calls}
        out.append(message)
    out.extend(held)
    return out
