"""skill-state.json: which skills are turned off, outside config.json.

`{"disabled_skills": ["name", ...]}`; other keys are kept when the file is
rewritten. The user's file is `$PICOBOT_HOME/skill-state.json`, the project's
`<project>/.picobot/skill-state.json`; a skill disabled in either is gone.
Blocking file I/O: call from a worker thread.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

__all__ = ["StateFileError", "read_disabled", "update_disabled", "write_atomic"]

_KEY = "disabled_skills"


class StateFileError(ValueError):
    """A state file that is not the JSON it should be (the message names it)."""


def _load(path: Path) -> dict[str, object]:
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    try:
        data = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as exc:
        raise StateFileError(f"{path}: not valid JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise StateFileError(f"{path}: must hold a JSON object")
    names = data.get(_KEY, [])
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise StateFileError(f"{path}: {_KEY!r} must be a list of skill names")
    return data


def read_disabled(path: Path) -> frozenset[str]:
    names = _load(path).get(_KEY, [])
    assert isinstance(names, list)
    return frozenset(str(n) for n in names)


def update_disabled(path: Path, add: Iterable[str] = (), remove: Iterable[str] = ()) -> list[str]:
    """Add and remove names in one atomic rewrite; returns the new list."""
    data = _load(path)
    current = data.get(_KEY, [])
    assert isinstance(current, list)
    dropped = set(remove)
    names = [str(n) for n in current if n not in dropped]
    names += [n for n in dict.fromkeys(add) if n not in names and n not in dropped]
    data[_KEY] = names
    write_atomic(path, json.dumps(data, ensure_ascii=False, indent=2) + "\n")
    return names


def write_atomic(path: Path, text: str) -> None:
    """Write through a temporary file renamed into place: a reader (the
    gateway's next scan) sees the old file or the new one, never half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
