"""SKILL.md: YAML front matter between `---` lines, then the body.

`description` is required; `name` is optional (the folder's name); unknown
fields are kept in `Skill.metadata`. A file that breaks a rule raises
`SkillFormatError` with a reason short enough for one log line.

Read leniently, as the reference clients do, where the intent is plain: a
description over `MAX_DESCRIPTION_CHARS` is cut (on a word), and front matter
that is not valid YAML because a top-level value holds an unquoted `: `
(`description: Use this when: the user asks`) is read again with each such
value taken as the rest of its line (quoted, then parsed by the same safe
loader). Either way the skill loads and `Skill.warning` says what was
forgiven (the runtime logs it once per file). Nothing else is relaxed: other
YAML errors, aliases, depth and size limits still make the file invalid.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

import yaml

from agent.front_matter import FrontMatterError, FrontMatterSyntaxError, parse_front_matter
from skills.model import Skill, SkillSource

__all__ = [
    "MAX_DESCRIPTION_CHARS",
    "SkillFormatError",
    "cut_description",
    "parse_skill",
    "render_skill",
]

MAX_DESCRIPTION_CHARS = 1024
_TOP_LEVEL_KEY = re.compile(r"([A-Za-z_][A-Za-z0-9_.-]*)[ \t]*:(?:[ \t]+(.*))?$")
# a value starting with one of these is not a plain scalar: left to YAML
_INDICATORS = frozenset("[]{}&*!|>'\"%@`#,?-")


class SkillFormatError(ValueError):
    """A SKILL.md that cannot be used (the message says why)."""


def cut_description(text: str) -> str:
    """`text` cut to `MAX_DESCRIPTION_CHARS`, on the last space of the cut if
    that keeps most of it, with `…` to show it was cut."""
    if len(text) <= MAX_DESCRIPTION_CHARS:
        return text
    cut = text[: MAX_DESCRIPTION_CHARS - 1]
    space = cut.rfind(" ")
    if space >= MAX_DESCRIPTION_CHARS * 3 // 4:
        cut = cut[:space]
    return cut.rstrip() + "…"


def _split(text: str) -> tuple[str, str]:
    """Front matter and body, as agent.front_matter splits them (only called
    once that split has succeeded)."""
    lines = text.lstrip("\ufeff").splitlines(keepends=True)
    end = next(n for n, line in enumerate(lines[1:], start=1) if line.strip() == "---")
    return "".join(lines[1:end]), "".join(lines[end + 1 :])


def _quote_colon_values(raw: str) -> str | None:
    """`raw` with every top-level plain value that holds `: ` (with its
    indented continuation lines) turned into one double-quoted string, or
    None when there is none: YAML reads `a: b: c` as a nested mapping and
    fails, where the writer meant the string `b: c`."""
    lines = raw.splitlines()
    out: list[str] = []
    changed = False
    n = 0
    while n < len(lines):
        line = lines[n]
        n += 1
        match = _TOP_LEVEL_KEY.match(line)
        value = (match.group(2) or "").strip() if match else ""
        if match is None or not value or value[0] in _INDICATORS:
            out.append(line)
            continue
        parts = [value]
        while n < len(lines) and (not lines[n].strip() or lines[n][0] in " \t"):
            parts.append(lines[n].strip())
            n += 1
        text = " ".join(p for p in parts if p).split(" #", 1)[0].rstrip()  # YAML comment
        if ": " not in text and not text.endswith(":"):
            out.append(line)
            out += lines[n - len(parts) + 1 : n]
            continue
        out.append(f"{match.group(1)}: {json.dumps(text, ensure_ascii=False)}")
        changed = True
    return "\n".join(out) + "\n" if changed else None


def _front_matter(text: str) -> tuple[dict[str, object], str, list[str]]:
    """The fields, the body, and what was forgiven to read them."""
    try:
        meta, body = parse_front_matter(text)
    except FrontMatterError as exc:
        if not isinstance(exc, FrontMatterSyntaxError):  # aliases, depth, size stay errors
            raise SkillFormatError(str(exc)) from None
        fixed = _quote_colon_values(_split(text)[0])
        if fixed is None:
            raise SkillFormatError(str(exc)) from None
        try:
            meta, _ = parse_front_matter(f"---\n{fixed}---\n")
        except FrontMatterError as again:  # a refusal (an alias, say) says more
            reason = exc if isinstance(again, FrontMatterSyntaxError) else again
            raise SkillFormatError(str(reason)) from None
        body = _split(text)[1]
        note = f"{exc} — read leniently, values holding ': ' as plain text (quote them)"
        return meta, body, [note]
    return meta, body, []


def parse_skill(text: str, folder: Path, source: SkillSource) -> Skill:
    meta, body, warnings = _front_matter(text)
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        raise SkillFormatError("front matter has no 'description'")
    description = " ".join(description.split())
    if len(description) > MAX_DESCRIPTION_CHARS:
        warnings.append(
            f"'description' is {len(description)} characters, cut to {MAX_DESCRIPTION_CHARS}"
        )
        description = cut_description(description)
    name = meta.get("name", folder.name)
    if not isinstance(name, str) or not name.strip() or "\n" in name:
        raise SkillFormatError("'name' must be a one-line string")
    return Skill(
        name.strip(),
        description,
        body.strip(),
        folder,
        source,
        dict(meta),
        warning="; ".join(warnings) or None,
    )


def render_skill(
    name: str, description: str, body: str, extra: Mapping[str, object] | None = None
) -> str:
    """A SKILL.md for `skill_manage create/update`; `extra` keeps fields it had."""
    meta: dict[str, object] = {**(extra or {}), "name": name, "description": description}
    front = yaml.safe_dump(meta, allow_unicode=True, sort_keys=False).strip()
    return f"---\n{front}\n---\n\n{body.strip()}\n"
