"""Markdown files with YAML front matter, one per folder under a root:
`<root>/<name>/SKILL.md`, `<root>/<name>/SUBAGENT.md`.

The file starts with a `---` line; the front matter (a YAML mapping) runs to
the next `---` line and the body follows. A file that breaks a rule raises
`FrontMatterError` with a reason short enough for one log line. A leaf: it
imports nothing from the project, so skills/ and agent/ share one parser.

The YAML is parsed by a safe loader that refuses aliases and anchors (an
"alias bomb" of a few lines would otherwise expand to billions of nodes) and
nesting deeper than `MAX_DEPTH`, on at most `MAX_FRONT_MATTER_CHARS`.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

__all__ = [
    "MAX_DEPTH",
    "MAX_FRONT_MATTER_CHARS",
    "FrontMatterError",
    "FrontMatterSyntaxError",
    "definition_folders",
    "parse_front_matter",
]

MAX_FRONT_MATTER_CHARS = 32_000
MAX_DEPTH = 20


def definition_folders(root: Path) -> list[Path]:
    """The folders under `root`, sorted, hidden ones and symbolic links left
    out; none if `root` is missing or unreadable. Blocking: call from a worker
    thread."""
    try:
        with os.scandir(root) as entries:
            return sorted(
                Path(e.path)
                for e in entries
                if e.is_dir(follow_symlinks=False) and not e.name.startswith(".")
            )
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return []


class FrontMatterError(ValueError):
    """A file whose front matter cannot be read (the message says why)."""


class FrontMatterSyntaxError(FrontMatterError):
    """Front matter that is not valid YAML (not a refusal: an alias, the depth,
    the size); a lenient reader may try again (skills.parse)."""


class _Refused(yaml.YAMLError):
    pass


class _SafeLoader(yaml.SafeLoader):
    """SafeLoader without aliases or anchors, and with a nesting limit."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise _Refused("front matter uses a YAML alias or anchor (not allowed)")
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _Refused(f"front matter is nested deeper than {MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


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
    if len(raw) > MAX_FRONT_MATTER_CHARS:
        raise FrontMatterError(f"front matter is longer than {MAX_FRONT_MATTER_CHARS} characters")
    loader = _SafeLoader(raw)
    try:
        meta = loader.get_single_data()
    except _Refused as exc:
        raise FrontMatterError(str(exc)) from None
    except yaml.YAMLError as exc:
        message = f"front matter is not valid YAML: {exc}".splitlines()[0]
        raise FrontMatterSyntaxError(message) from None
    finally:
        loader.dispose()
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise FrontMatterError("front matter must be a mapping of fields")
    return {str(k): v for k, v in meta.items()}, body
