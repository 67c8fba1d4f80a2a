"""Markdown files with YAML front matter, one per folder under a root:
`<root>/<name>/SKILL.md`, `<root>/<name>/SUBAGENT.md`.

The file starts with a `---` line; the front matter (a YAML mapping) runs to
the next `---` line and the body follows. A file that breaks a rule raises
`FrontMatterError` with a reason short enough for one log line. A leaf: it
imports nothing from the project, so skills/ and agent/ share one parser.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

__all__ = ["FrontMatterError", "definition_folders", "parse_front_matter"]


def definition_folders(root: Path) -> list[Path]:
    """The folders under `root`, sorted, hidden ones left out; none if `root`
    is missing or unreadable. Blocking: call from a worker thread."""
    try:
        with os.scandir(root) as entries:
            return sorted(
                Path(e.path) for e in entries if e.is_dir() and not e.name.startswith(".")
            )
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return []


class FrontMatterError(ValueError):
    """A file whose front matter cannot be read (the message says why)."""


def _split(text: str) -> tuple[str, str]:
    lines = text.lstrip("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise FrontMatterError("no front matter (the file must start with a '---' line)")
    for n, line in enumerate(lines[1:], start=1):
        if line.strip() == "---":
            return "".join(lines[1:n]), "".join(lines[n + 1 :])
    raise FrontMatterError("front matter is not closed by a '---' line")


def parse_front_matter(text: str) -> tuple[dict[str, object], str]:
    """The front matter's fields (keys as strings) and the body after it."""
    raw, body = _split(text)
    try:
        meta = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        raise FrontMatterError(f"front matter is not valid YAML: {exc}".splitlines()[0]) from None
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise FrontMatterError("front matter must be a mapping of fields")
    return {str(k): v for k, v in meta.items()}, body
