"""History compaction: decide when, split at a user turn, summarise the old part.

The execution service calls this in the background after a turn's messages are
persisted and its reply dispatched:

1. `should_compact(history, …)` — the approximate token estimate
   (characters / 4 × 1.2) is above `ratio` of the context window, the history
   has more than `keep_user_turns` user turns, and (with a `CompactionState`)
   a compaction that could not get below the trigger is not retried before a
   new user turn arrives.
2. `compact(history, provider, model, …)` — splits the history at the user
   message that starts the last `keep_user_turns` turns (never between a tool
   call and its result), keeps agent / scheduled prompts verbatim, and asks the
   same provider to summarise the rest. A failed or timed-out summary falls back
   to a truncated transcript; `compact` never raises into the main flow
   (cancellation excepted).

The result is a value; committing it atomically is `storage.sql.conversations.compaction`'s job.
This module never touches storage, channels or the gateway.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import structlog

from agent.compaction_prompt import (
    SUMMARY_SYSTEM_PROMPT,
    bound_summary,
    cut_to_budget,
    format_transcript,
    summary_request_text,
    with_prefix,
)
from agent.messages import (
    ChatMessage,
    HistorySize,
    Marker,
    Role,
    Usage,
    message_chars,
    tokens_for_chars,
)
from agent.providers.base import LLMProvider, LLMRequest, ProviderError

__all__ = [
    "DEFAULT_CONTEXT_WINDOW_TOKENS",
    "DEFAULT_KEEP_USER_TURNS",
    "DEFAULT_SUMMARY_TIMEOUT_SECS",
    "DEFAULT_TRIGGER_RATIO",
    "CompactionResult",
    "CompactionState",
    "HistorySplit",
    "compact",
    "compaction_due",
    "count_user_turns",
    "estimate_tokens",
    "fallback_budget_chars",
    "plan_boundary",
    "should_compact",
    "split_history",
    "splits_tool_pair",
    "summary_budget_chars",
    "tokens_for_chars",
    "transcript_budget_chars",
    "trigger_tokens",
]

log = structlog.get_logger(__name__)

DEFAULT_CONTEXT_WINDOW_TOKENS: Final = 128_000
DEFAULT_TRIGGER_RATIO: Final = 0.5
DEFAULT_KEEP_USER_TURNS: Final = 3
DEFAULT_SUMMARY_TIMEOUT_SECS: Final = 120.0

_CHARS_PER_TOKEN: Final = 4
_TRANSCRIPT_BUDGET_RATIO: Final = 0.4  # of the window, for what the summariser reads
_FALLBACK_BUDGET_RATIO: Final = 0.1  # of the window, for a summary-less fallback
_SUMMARY_BUDGET_RATIO: Final = 0.05  # of the window, for the summary itself
_FALLBACK_NOTE: Final = (
    "(No summary could be produced; the most recent part of the earlier transcript follows.)"
)
# Kept verbatim across compactions: the persona and the scheduled-job constraints.
_KEPT_MARKERS: Final = frozenset({Marker.AGENT_PROMPT, Marker.SCHEDULED_SYSTEM_PROMPT})


def estimate_tokens(messages: Sequence[ChatMessage]) -> int:
    """Approximate tokens: characters / 4 × 1.2 (a safety factor), rounded up.

    Counts content, reasoning and tool calls (name + arguments); no tokenizer.
    """
    return tokens_for_chars(sum(message_chars(m) for m in messages))


def count_user_turns(history: Sequence[ChatMessage]) -> int:
    return sum(1 for m in history if m.role is Role.USER)


def trigger_tokens(window_tokens: int, ratio: float = DEFAULT_TRIGGER_RATIO) -> int:
    """The estimate above which a history needs compaction."""
    return int(window_tokens * ratio)


def transcript_budget_chars(window_tokens: int) -> int:
    """How much transcript the summariser is shown: 40% of the window, in characters."""
    return int(window_tokens * _TRANSCRIPT_BUDGET_RATIO * _CHARS_PER_TOKEN)


def fallback_budget_chars(window_tokens: int) -> int:
    """How much transcript replaces the summary when summarising fails."""
    return int(window_tokens * _FALLBACK_BUDGET_RATIO * _CHARS_PER_TOKEN)


def summary_budget_chars(window_tokens: int) -> int:
    """The longest summary kept (the request asks for no more): 5% of the window."""
    return int(window_tokens * _SUMMARY_BUDGET_RATIO * _CHARS_PER_TOKEN)


def splits_tool_pair(history: Sequence[ChatMessage], boundary: int) -> bool:
    """True if some tool call before `boundary` has its result at or after it."""
    called = {call.id for m in history[:boundary] for call in m.tool_calls}
    return any(m.role is Role.TOOL and m.tool_call_id in called for m in history[boundary:])


def plan_boundary(
    history: Sequence[ChatMessage], keep_user_turns: int = DEFAULT_KEEP_USER_TURNS
) -> int | None:
    """Index of the user message where the kept recent part starts, or None.

    The recent part holds at least `keep_user_turns` whole user turns and the
    old part at least one. Normally the boundary is the user message starting
    the last `keep_user_turns` turns; if a tool call and its result would be
    separated there (a user message between them), an earlier turn start is
    used, so pairs always stay whole.
    """
    if keep_user_turns < 1:
        raise ValueError("keep_user_turns must be >= 1")
    starts = [i for i, m in enumerate(history) if m.role is Role.USER]
    if len(starts) <= keep_user_turns:
        return None
    for boundary in reversed(starts[1 : len(starts) - keep_user_turns + 1]):
        if not splits_tool_pair(history, boundary):
            return boundary
    return None


@dataclass(frozen=True, slots=True)
class CompactionState:
    """What a session remembers about its last compaction, to avoid a loop.

    `turns_at_last` is the number of user turns in the active history right
    after that compaction. Reset it (None) when the session starts a new
    segment by other means (/new, reset).
    """

    last_estimate_after: int
    turns_at_last: int

    @classmethod
    def after(cls, result: CompactionResult) -> CompactionState:
        return cls(result.estimate_after, count_user_turns(result.recent))


def compaction_due(
    size: HistorySize,
    window_tokens: int = DEFAULT_CONTEXT_WINDOW_TOKENS,
    ratio: float = DEFAULT_TRIGGER_RATIO,
    keep_user_turns: int = DEFAULT_KEEP_USER_TURNS,
    state: CompactionState | None = None,
) -> bool:
    """The cheap part of the decision, from the history's running size alone:
    over the trigger, more user turns than are kept, and not an attempt that
    already failed to get below the trigger with no new user turn since."""
    limit = trigger_tokens(window_tokens, ratio)
    if size.tokens <= limit or size.user_turns <= keep_user_turns:
        return False
    if state is not None and state.last_estimate_after > limit:
        return size.user_turns > state.turns_at_last  # wait for a new turn
    return True


def should_compact(
    history: Sequence[ChatMessage],
    window_tokens: int = DEFAULT_CONTEXT_WINDOW_TOKENS,
    ratio: float = DEFAULT_TRIGGER_RATIO,
    keep_user_turns: int = DEFAULT_KEEP_USER_TURNS,
    state: CompactionState | None = None,
) -> bool:
    """Whether the active history should be compacted now."""
    size = HistorySize.of(history)
    if not compaction_due(size, window_tokens, ratio, keep_user_turns, state):
        return False
    return plan_boundary(history, keep_user_turns) is not None


@dataclass(frozen=True, slots=True)
class HistorySplit:
    kept_system: tuple[ChatMessage, ...]  # verbatim, in their original order
    folded: tuple[ChatMessage, ...]  # becomes the transcript to summarise
    recent: tuple[ChatMessage, ...]  # kept whole, from the boundary on


def split_history(history: Sequence[ChatMessage], boundary: int) -> HistorySplit:
    """Sort the messages before `boundary` into kept and folded; the rest is recent.

    Scheduled-job prompts are all kept; of the agent prompts only the latest is
    kept (older ones are earlier copies of the same AGENT.md, superseded by the
    re-injection). Skill indexes are dropped: they are rebuilt every turn.
    Earlier compaction summaries and every other message are folded.
    """
    if not 0 < boundary < len(history) or history[boundary].role is not Role.USER:
        raise ValueError(f"boundary {boundary} is not a user message inside the history")
    if splits_tool_pair(history, boundary):
        raise ValueError(f"boundary {boundary} separates a tool call from its result")
    old = history[:boundary]
    last_prompt = max(
        (i for i, m in enumerate(old) if m.marker == Marker.AGENT_PROMPT), default=None
    )
    kept: list[ChatMessage] = []
    folded: list[ChatMessage] = []
    for i, message in enumerate(old):
        if message.role is Role.SYSTEM and message.marker in _KEPT_MARKERS:
            if message.marker != Marker.AGENT_PROMPT or i == last_prompt:
                kept.append(message)
        elif message.marker != Marker.SKILL_INDEX:
            folded.append(message)
    return HistorySplit(tuple(kept), tuple(folded), tuple(history[boundary:]))


@dataclass(frozen=True, slots=True)
class CompactionResult:
    kept_system: tuple[ChatMessage, ...]
    summary: ChatMessage  # system, marker HISTORY_COMPACTION, "[Compressed History]…"
    recent: tuple[ChatMessage, ...]
    estimate_before: int
    estimate_after: int
    summarised: bool  # False when the summary is the truncation fallback

    @property
    def new_history(self) -> list[ChatMessage]:
        """The new active segment: kept system messages, the summary, recent turns."""
        return [*self.kept_system, self.summary, *self.recent]

    @property
    def shrunk(self) -> bool:
        return self.estimate_after < self.estimate_before


async def compact(
    history: Sequence[ChatMessage],
    provider: LLMProvider,
    model: str,
    window_tokens: int = DEFAULT_CONTEXT_WINDOW_TOKENS,
    keep_user_turns: int = DEFAULT_KEEP_USER_TURNS,
    *,
    timeout_secs: float = DEFAULT_SUMMARY_TIMEOUT_SECS,
) -> CompactionResult | None:
    """Compact `history` (the persisted active segment); None if there is nothing to fold.

    Only cancellation propagates: a provider failure, a timeout or an empty
    answer yields the truncation fallback instead.
    """
    boundary = plan_boundary(history, keep_user_turns)
    if boundary is None:
        return None
    split = split_history(history, boundary)
    head, body = format_transcript(split.folded)
    transcript = cut_to_budget(head, body, transcript_budget_chars(window_tokens))
    budget = summary_budget_chars(window_tokens)
    text, usage = await _summarise(provider, model, transcript, budget, timeout_secs)
    summarised = text is not None
    if text is None:
        fallback = cut_to_budget(head, body, fallback_budget_chars(window_tokens))
        text = f"{_FALLBACK_NOTE}\n\n{fallback}"
    summary = ChatMessage.system(with_prefix(text), marker=Marker.HISTORY_COMPACTION)
    summary.usage = usage  # the summary call's tokens count towards the session's
    new_history = [*split.kept_system, summary, *split.recent]
    result = CompactionResult(
        kept_system=split.kept_system,
        summary=summary,
        recent=split.recent,
        estimate_before=estimate_tokens(history),
        estimate_after=estimate_tokens(new_history),
        summarised=summarised,
    )
    log.info(
        "history_compacted",
        folded=len(split.folded),
        kept_system=len(split.kept_system),
        recent=len(split.recent),
        estimate_before=result.estimate_before,
        estimate_after=result.estimate_after,
        summarised=summarised,
    )
    return result


async def _summarise(
    provider: LLMProvider, model: str, transcript: str, budget_chars: int, timeout_secs: float
) -> tuple[str | None, Usage | None]:
    request = LLMRequest(
        model=model,
        messages=[
            ChatMessage.system(SUMMARY_SYSTEM_PROMPT),
            ChatMessage.user(summary_request_text(transcript, budget_chars)),
        ],
    )
    try:
        async with asyncio.timeout(timeout_secs):
            response = await provider.complete(request)
    except TimeoutError:
        log.warning("compaction_summary_timeout", provider=provider.name, timeout=timeout_secs)
        return None, None
    except ProviderError as exc:
        log.warning("compaction_summary_failed", provider=provider.name, error=type(exc).__name__)
        return None, None
    except Exception:  # a bug in a provider must not break the turn that triggered us
        log.exception("compaction_summary_crashed", provider=provider.name)
        return None, None
    text = response.content.strip()
    if not text:
        log.warning("compaction_summary_empty", provider=provider.name)
        return None, response.usage
    if len(text) > budget_chars:
        log.warning("compaction_summary_cut", provider=provider.name, chars=len(text))
    return bound_summary(text, budget_chars), response.usage
