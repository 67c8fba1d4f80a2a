"""SKILL.md: YAML front matter between `---` lines, then the body.

`description` is required; `name` is optional (the folder's name); unknown
fields are kept in `Skill.metadata`. A file that breaks a rule raises
`SkillFormatError` with a reason short enough for one log line.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import yaml

from skills.model import Skill, SkillSource

__all__ = ["MAX_DESCRIPTION_CHARS", "SkillFormatError", "parse_skill", "render_skill"]

MAX_DESCRIPTION_CHARS = 1024


class SkillFormatError(ValueError):
    """A SKILL.md that cannot be used (the message says why)."""


def _split(text: str) -> tuple[str, str]:
    lines = text.lstrip("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise SkillFormatError("no front matter (the file must start with a '---' line)")
    for n, line in enumerate(lines[1:], start=1):
        if line.strip() == "---":
            return "".join(lines[1:n]), "".join(lines[n + 1 :])
    raise SkillFormatError("front matter is not closed by a '---' line")


def parse_skill(text: str, folder: Path, source: SkillSource) -> Skill:
    raw, body = _split(text)
    try:
        meta = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        raise SkillFormatError(f"front matter is not valid YAML: {exc}".splitlines()[0]) from None
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise SkillFormatError("front matter must be a mapping of fields")
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        raise SkillFormatError("front matter has no 'description'")
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise SkillFormatError(f"'description' is longer than {MAX_DESCRIPTION_CHARS} characters")
    name = meta.get("name", folder.name)
    if not isinstance(name, str) or not name.strip() or "\n" in name:
        raise SkillFormatError("'name' must be a one-line string")
    metadata = {str(k): v for k, v in meta.items()}
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
