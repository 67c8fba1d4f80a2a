"""The skill index: the short list of skills sent with every turn.

Names and descriptions only (bodies are loaded with `skill_activate`), at most
`max_listed` entries and `max_chars` characters in all, ending with
"…and N more" when cut. The same skills give the same text, byte for byte,
so the index never disturbs the provider's prompt cache on its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from skills.model import Skill

__all__ = ["IndexLimits", "render_index"]

HEADER = (
    "Skills: before a task one of these covers, call `skill_activate` with its name and "
    "follow what it says."
)
_LINE_DESCRIPTION_CHARS = 200


@dataclass(frozen=True, slots=True)
class IndexLimits:
    max_chars: int = 4_000
    max_listed: int = 32


def _line(skill: Skill) -> str:
    text = skill.description
    if len(text) > _LINE_DESCRIPTION_CHARS:
        text = text[: _LINE_DESCRIPTION_CHARS - 1].rstrip() + "…"
    return f"- {skill.name}: {text}"


def _more(n: int) -> str:
    return f"…and {n} more (`skill_manage` with action `list` shows them all)."


def render_index(skills: Sequence[Skill], limits: IndexLimits) -> str | None:
    """The index text for `skills` (already in order), or None when there are none."""
    if not skills:
        return None
    lines = [HEADER]
    size = len(HEADER)
    listed = 0
    for n, skill in enumerate(skills):
        line = _line(skill)
        left = len(skills) - n - 1
        # room for this line and, if any are left, the "…and N more" line after it
        tail = len(_more(left)) + 1 if left else 0
        if listed >= limits.max_listed or size + 1 + len(line) + tail > limits.max_chars:
            break
        lines.append(line)
        size += 1 + len(line)
        listed += 1
    if listed < len(skills):
        lines.append(_more(len(skills) - listed))
    text = "\n".join(lines)
    return text if len(text) <= limits.max_chars else text[: limits.max_chars]
