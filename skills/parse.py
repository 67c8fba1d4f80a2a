"""SKILL.md: YAML front matter between `---` lines, then the body.

`description` is required; `name` is optional (the folder's name); unknown
fields are kept in `Skill.metadata`. A file that breaks a rule raises
`SkillFormatError` with a reason short enough for one log line.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import yaml

from agent.front_matter import FrontMatterError, parse_front_matter
from skills.model import Skill, SkillSource

__all__ = ["MAX_DESCRIPTION_CHARS", "SkillFormatError", "parse_skill", "render_skill"]

MAX_DESCRIPTION_CHARS = 1024


class SkillFormatError(ValueError):
    """A SKILL.md that cannot be used (the message says why)."""


def parse_skill(text: str, folder: Path, source: SkillSource) -> Skill:
    try:
        meta, body = parse_front_matter(text)
    except FrontMatterError as exc:
        raise SkillFormatError(str(exc)) from None
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        raise SkillFormatError("front matter has no 'description'")
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise SkillFormatError(f"'description' is longer than {MAX_DESCRIPTION_CHARS} characters")
    name = meta.get("name", folder.name)
    if not isinstance(name, str) or not name.strip() or "\n" in name:
        raise SkillFormatError("'name' must be a one-line string")
    metadata = dict(meta)
    return Skill(
        name.strip(), " ".join(description.split()), body.strip(), folder, source, metadata
    )


def render_skill(
    name: str, description: str, body: str, extra: Mapping[str, object] | None = None
) -> str:
    """A SKILL.md for `skill_manage create/update`; `extra` keeps fields it had."""
    meta: dict[str, object] = {**(extra or {}), "name": name, "description": description}
    front = yaml.safe_dump(meta, allow_unicode=True, sort_keys=False).strip()
    return f"---\n{front}\n---\n\n{body.strip()}\n"
