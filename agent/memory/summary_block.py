"""The managed memory-summary block of AGENT.md, for the operator to read.

Maintenance rewrites the lines from BEGIN to END (one `##` section per user
scope) and leaves every byte outside them as it was; without markers the
block is appended. The block is never sent to the model as part of AGENT.md
(`strip_block`): each user's own section reaches only that user, and only in
a private chat (summary_part). The database holds the summaries; the block
is a mirror, so an edit inside it is overwritten at the next run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

__all__ = ["BEGIN", "END", "render_block", "replace_block", "strip_block"]

BEGIN: Final = "<!-- picobot:memory-summary:begin -->"
END: Final = "<!-- picobot:memory-summary:end -->"
_NOTE: Final = (
    "<!-- Written by picobot's memory maintenance from its database: edits inside"
    " this block are overwritten. Each user's section is shown only to that user. -->"
)


def _clean(text: str) -> str:
    return text.replace(BEGIN, "").replace(END, "").strip()


def render_block(sections: Sequence[tuple[str, str]]) -> str:
    """BEGIN … END with one section per (scope key, summary markdown)."""
    lines = [BEGIN, _NOTE]
    for scope_key, summary in sections:
        lines += ["", f"## Memory summary: {scope_key}", "", _clean(summary)]
    lines.append(END)
    return "\n".join(lines) + "\n"


def _span(text: str) -> tuple[int, int] | None:
    """Start of the BEGIN line and end of the END line (with its newline)."""
    start = text.find(BEGIN)
    if start < 0:
        return None
    end = text.find(END, start)
    if end < 0:
        return None
    start = text.rfind("\n", 0, start) + 1
    stop = text.find("\n", end)
    return start, len(text) if stop < 0 else stop + 1


def replace_block(text: str, block: str) -> str:
    span = _span(text)
    if span is None:
        sep = "" if not text or text.endswith("\n\n") else ("\n" if text.endswith("\n") else "\n\n")
        return text + sep + block
    return text[: span[0]] + block + text[span[1] :]


def strip_block(text: str) -> str:
    span = _span(text)
    return text if span is None else text[: span[0]] + text[span[1] :]
