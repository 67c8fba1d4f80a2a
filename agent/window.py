"""Fitting a request into the model's context window, before it is sent.

Compaction keeps a history small in the background, but a request must fit
even when it has not run yet (a long import, compaction off, one huge turn).
`fit` measures the request with the same estimate as compaction (characters
/ 4 × 1.2, agent.messages.tokens_for_chars) and, only when it is over the
budget, drops the oldest whole user turns — keeping the latest agent prompt
and compaction summary, and never a tool result without its call. If the
current turn alone is still too large, its tool results are cut to share
what is left. Nothing here changes the stored history: only what is sent.
"""

from __future__ import annotations

import json
import operator
from collections import OrderedDict
from collections.abc import Sequence

from agent.messages import ChatMessage, Marker, Role, message_chars, tokens_for_chars
from agent.providers.base import ToolSpec

__all__ = ["fit", "request_budget"]

_CHARS_PER_TOKEN_INVERSE = 10 / 3  # chars for one estimated token (the inverse of × 0.3)
_MIN_TOOL_RESULT_CHARS = 200
_CUT_NOTE = "\n[… cut to fit the model's context window]"
_KEPT = (Marker.AGENT_PROMPT, Marker.HISTORY_COMPACTION)


def request_budget(window_tokens: int, max_tokens: int | None, tools: Sequence[ToolSpec]) -> int:
    """Tokens the messages of a request may take: the window less the reply's
    room (`max_tokens`, else an eighth of the window up to 4,096) and the tool
    definitions, never less than a quarter of the window."""
    reserve = max_tokens if max_tokens else min(4_096, window_tokens // 8)
    return max(window_tokens - reserve - tokens_for_chars(_spec_chars(tools)), window_tokens // 4)


# The tool set of a turn is nearly always the one of the last (the registry
# hands out the same spec objects), so its size is measured once per set.
_MEASURED: OrderedDict[tuple[int, ...], tuple[tuple[ToolSpec, ...], int]] = OrderedDict()
_MEASURED_SETS = 8


def _spec_chars(tools: Sequence[ToolSpec]) -> int:
    key = tuple(map(id, tools))
    hit = _MEASURED.get(key)
    if hit is not None and all(map(operator.is_, hit[0], tools)):  # ids of live objects
        _MEASURED.move_to_end(key)
        return hit[1]
    chars = sum(len(t.name) + len(t.description) + len(json.dumps(t.parameters)) for t in tools)
    _MEASURED[key] = (tuple(tools), chars)  # holding the specs keeps their ids unique
    while len(_MEASURED) > _MEASURED_SETS:
        _MEASURED.popitem(last=False)
    return chars


def fit(
    head: Sequence[ChatMessage],
    older: Sequence[ChatMessage],
    current: Sequence[ChatMessage],
    tail: Sequence[ChatMessage],
    budget_tokens: int,
    known_chars: int | None = None,
) -> list[ChatMessage]:
    """`[*head, *older, *current]`, shortened from the front of `older` until
    it fits `budget_tokens` together with `tail` (see the module docstring).
    `known_chars`: an upper bound of `older` and `current`'s size (the
    history's running size): when that fits, nothing is measured."""
    fixed = sum(message_chars(m) for m in head) + sum(message_chars(m) for m in tail)
    if known_chars is not None and tokens_for_chars(fixed + known_chars) <= budget_tokens:
        return [*head, *older, *current]
    sizes = [message_chars(m) for m in older]
    now = sum(message_chars(m) for m in current)
    if tokens_for_chars(fixed + sum(sizes) + now) <= budget_tokens:
        return [*head, *older, *current]
    budget_chars = int(budget_tokens * _CHARS_PER_TOKEN_INVERSE)
    # the latest agent prompt and compaction summary survive the cut
    kept: dict[str, int] = {}
    for i, m in enumerate(older):
        if m.role is Role.SYSTEM and m.marker in _KEPT:
            kept[m.marker] = i
    cut = len(older)
    suffix = 0
    for i in range(len(older) - 1, -1, -1):
        suffix += sizes[i]
        if older[i].role is not Role.USER:
            continue
        pinned = sum(sizes[k] for k in kept.values() if k < i)
        if fixed + pinned + suffix + now > budget_chars:
            break
        cut = i
    pinned_messages = [older[k] for k in sorted(kept.values()) if k < cut]
    rest = [*older[cut:], *current]
    called = {call.id for m in rest for call in m.tool_calls}
    rest = [m for m in rest if m.role is not Role.TOOL or m.tool_call_id in called]
    fixed += sum(message_chars(m) for m in pinned_messages)
    if fixed + sum(message_chars(m) for m in rest) > budget_chars:
        rest = _cut_tool_results(rest, budget_chars - fixed)
    return [*head, *pinned_messages, *rest]


def _cut_tool_results(messages: list[ChatMessage], room: int) -> list[ChatMessage]:
    """Tool results cut to an equal share of what the other messages leave."""
    results = [m for m in messages if m.role is Role.TOOL]
    if not results:
        return messages
    others = sum(message_chars(m) for m in messages if m.role is not Role.TOOL)
    share = max((room - others) // len(results) - len(_CUT_NOTE), _MIN_TOOL_RESULT_CHARS)
    return [
        ChatMessage(
            Role.TOOL,
            m.content[:share] + _CUT_NOTE,
            tool_call_id=m.tool_call_id,
            name=m.name,
            seq=m.seq,
        )
        if m.role is Role.TOOL and len(m.content) > share
        else m
        for m in messages
    ]
