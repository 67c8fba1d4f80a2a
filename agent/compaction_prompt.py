"""Text side of history compaction: the transcript, the summary prompt, the budget cut.

Turns the messages being folded into a plain-text transcript that keeps roles
and tool names, cuts it to a character budget (keeping the most recent part
and saying so), and holds the instruction that tells the model what a summary
must keep. Pure functions only; the provider call lives in `agent.compaction`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from agent.messages import ChatMessage, Marker, Role

__all__ = [
    "COMPRESSED_HISTORY_PREFIX",
    "SUMMARY_SYSTEM_PROMPT",
    "bound_summary",
    "cut_to_budget",
    "format_transcript",
    "summary_request_text",
    "with_prefix",
]

COMPRESSED_HISTORY_PREFIX: Final = "[Compressed History]"

SUMMARY_SYSTEM_PROMPT: Final = """\
You compress the earlier part of a conversation between a user and an AI assistant \
so that the assistant can continue the work without the original messages.

Write a faithful, dense summary in the language of the conversation. Keep:
- user requests and questions, with what exactly was asked;
- key identifiers: names, IDs, numbers, dates, versions;
- file paths and URLs, verbatim;
- tool calls (tool name and the important arguments) and commands run;
- results and outputs that matter later, and every error message;
- decisions taken and their reasons;
- the user's preferences and constraints;
- the current task state: what is done, what is in progress, what is still open.

Drop greetings, repetition and filler. Do not invent anything that is not in the \
transcript. If the transcript starts with an earlier summary, merge it into yours. \
Reply with the summary only."""

_CUT_NOTICE: Final = "[... earlier part of the transcript cut: {omitted} characters omitted ...]\n"
_SUMMARY_CUT_NOTICE: Final = "\n[... summary cut: {omitted} characters omitted ...]"


def _render(message: ChatMessage) -> str:
    if message.marker == Marker.HISTORY_COMPACTION:
        return f"[earlier summary]\n{message.content}"
    lines: list[str] = []
    if message.role is Role.TOOL:
        lines.append(f"[tool {message.name or 'unknown'}] {message.content}")
    elif message.content or message.role is not Role.ASSISTANT:
        lines.append(f"[{message.role.value}] {message.content}")
    if message.media:
        lines.append(f"[{message.role.value} attachments] {', '.join(message.media)}")
    lines.extend(
        f"[assistant tool call {call.name}] {call.arguments}" for call in message.tool_calls
    )
    return "\n".join(lines)


def format_transcript(messages: Sequence[ChatMessage]) -> tuple[str, str]:
    """Render messages as (earlier summaries, transcript body).

    Earlier compaction summaries are returned apart so a budget cut can spare
    them: they already condense everything older than the body.
    """
    summaries = [_render(m) for m in messages if m.marker == Marker.HISTORY_COMPACTION]
    body = [_render(m) for m in messages if m.marker != Marker.HISTORY_COMPACTION]
    return "\n\n".join(summaries), "\n\n".join(part for part in body if part)


def cut_to_budget(head: str, body: str, budget_chars: int) -> str:
    """Join head and body within `budget_chars`, dropping the oldest body text first.

    The head (earlier summaries) may use at most half of the budget; what is
    cut is announced in the text so the summariser knows the start is missing.
    """
    if budget_chars <= 0:
        raise ValueError("budget_chars must be positive")
    separator = "\n\n" if head and body else ""
    if len(head) + len(separator) + len(body) <= budget_chars:
        return head + separator + body
    if len(head) > budget_chars // 2:
        head = head[: budget_chars // 2]
        separator = "\n\n" if body else ""
    room = budget_chars - len(head) - len(separator)
    notice = _CUT_NOTICE.format(omitted=len(body))
    room -= len(notice) + 10  # the omitted count may grow by a few digits
    kept = body[-room:] if room > 0 else ""
    notice = _CUT_NOTICE.format(omitted=len(body) - len(kept))
    return head + separator + notice + kept


def summary_request_text(transcript: str, max_chars: int) -> str:
    """The user message of the summary request."""
    return (
        f"Summarise this earlier part of the conversation in at most {max_chars:,} characters:"
        f"\n\n<transcript>\n{transcript}\n</transcript>"
    )


def bound_summary(text: str, budget_chars: int) -> str:
    """`text` within `budget_chars`, its end cut (at a line end when one is
    near) and the cut said: a model that ignores the limit, or a summariser
    that echoes its input, must not leave a summary that fills the window."""
    if len(text) <= budget_chars:
        return text
    kept = text[:budget_chars]
    line_end = kept.rfind("\n")
    if line_end > budget_chars * 0.8:
        kept = kept[:line_end]
    return kept + _SUMMARY_CUT_NOTICE.format(omitted=len(text) - len(kept))


def with_prefix(text: str) -> str:
    """Summary text as stored: always starts with `[Compressed History]`."""
    text = text.strip()
    if text.startswith(COMPRESSED_HISTORY_PREFIX):
        text = text[len(COMPRESSED_HISTORY_PREFIX) :].lstrip()
    return f"{COMPRESSED_HISTORY_PREFIX}\n{text}"
