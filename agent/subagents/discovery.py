"""Custom sub-agent types from SUBAGENT.md files, the way skills are found.

Sources, lowest precedence first (a later one overrides a same-named type):
`user` = `$PICOBOT_HOME/subagents/*/SUBAGENT.md`, `project` =
`<project>/.picobot/subagents/*/SUBAGENT.md`. The front matter is read by
`agent.front_matter` (the parser skills use). A file that breaks a rule is
reported in `Scan.invalid` with the reason and skipped; it never stops the
gateway. A SUBAGENT.md is read like a SKILL.md (agent.tools.confined): a
regular file only, not through a link, never waited on (a FIFO), at most
`MAX_SUBAGENT_BYTES`; folders that are links are skipped. Blocking file I/O:
call from a worker thread.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agent.front_matter import FrontMatterError, definition_folders, parse_front_matter
from agent.subagents.types import EXPLORE, GENERAL, SubagentSource, SubagentType
from agent.tools.confined import read_regular

__all__ = [
    "MAX_SUBAGENT_BYTES",
    "SUBAGENT_FILE",
    "Invalid",
    "Scan",
    "SubagentFormatError",
    "parse_subagent",
    "scan",
]

SUBAGENT_FILE = "SUBAGENT.md"
MAX_SUBAGENT_BYTES = 256 * 1024
_BUILTIN_NAMES = frozenset({GENERAL.name, EXPLORE.name})


class SubagentFormatError(ValueError):
    """A SUBAGENT.md that cannot be used (the message says why)."""


@dataclass(frozen=True, slots=True)
class Invalid:
    path: Path
    source: SubagentSource
    reason: str


@dataclass(frozen=True, slots=True)
class Scan:
    types: dict[str, SubagentType]  # the winner of each name
    invalid: tuple[Invalid, ...]


def _string(meta: dict[str, object], key: str, *, required: bool) -> str | None:
    value = meta.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise SubagentFormatError(
            f"front matter has no '{key}'" if value is None else f"'{key}' must be text"
        )
    return value


def parse_subagent(text: str, folder: Path, source: SubagentSource) -> SubagentType:
    try:
        meta, body = parse_front_matter(text)
    except FrontMatterError as exc:
        raise SubagentFormatError(str(exc)) from None
    description = _string(meta, "description", required=True)
    template = _string(meta, "prompt_template", required=True)
    assert description is not None
    assert template is not None
    name = meta.get("name", folder.name)
    if not isinstance(name, str) or not name.strip() or "\n" in name:
        raise SubagentFormatError("'name' must be a one-line string")
    if name.strip() in _BUILTIN_NAMES:
        raise SubagentFormatError(f"'{name.strip()}' is a built-in type and cannot be redefined")
    tools = meta.get("allowed_tools")
    if tools is not None and (
        not isinstance(tools, list) or not all(isinstance(t, str) and t for t in tools)
    ):
        raise SubagentFormatError("'allowed_tools' must be a list of tool names")
    secs = meta.get("max_execution_secs")
    if secs is not None and (isinstance(secs, bool) or not isinstance(secs, int) or secs <= 0):
        raise SubagentFormatError("'max_execution_secs' must be a positive whole number")
    agent = _string(meta, "agent", required=False)
    return SubagentType(
        name.strip(),
        " ".join(description.split()),
        template,
        body.strip(),
        frozenset(tools) if tools is not None else None,
        float(secs) if secs is not None else None,
        agent.strip() if agent is not None else None,
        source,
        folder / SUBAGENT_FILE,
    )


def _read(folder: Path) -> str:
    dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        raw = read_regular(dir_fd, SUBAGENT_FILE, MAX_SUBAGENT_BYTES, where=folder)
    finally:
        os.close(dir_fd)
    return raw.decode("utf-8")


def scan(roots: Sequence[tuple[SubagentSource, Path]]) -> Scan:
    """Every SUBAGENT.md under `roots` (lowest precedence first)."""
    found: dict[str, SubagentType] = {}
    invalid: list[Invalid] = []
    for source, root in roots:
        for folder in definition_folders(root):
            path = folder / SUBAGENT_FILE
            try:
                text = _read(folder)
            except FileNotFoundError:
                continue
            except (OSError, UnicodeDecodeError) as exc:
                invalid.append(Invalid(path, source, str(exc) or type(exc).__name__))
                continue
            try:
                kind = parse_subagent(text, folder, source)
            except SubagentFormatError as exc:
                invalid.append(Invalid(path, source, str(exc) or type(exc).__name__))
                continue
            found[kind.name] = kind  # a later source overrides
    return Scan(found, tuple(invalid))
