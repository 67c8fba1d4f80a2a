"""skill-state.json: which skills are turned off, outside config.json.

`{"disabled_skills": ["name", ...]}`; other keys are kept when the file is
rewritten. The user's file is `$PICOBOT_HOME/skill-state.json`, the project's
`<project>/.picobot/skill-state.json`; a skill disabled in either is gone.
Blocking file I/O: call from a worker thread.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from agent.tools.confined import ConfinedError, open_dir, read_regular, write_atomic_in

__all__ = ["MAX_STATE_BYTES", "StateFileError", "read_disabled", "update_disabled", "write_atomic"]

_KEY = "disabled_skills"
MAX_STATE_BYTES = 64 * 1024


class StateFileError(ValueError):
    """A state file that is not the JSON it should be (the message names it)."""


def _load(path: Path) -> dict[str, object]:
    try:  # no link followed, no FIFO waited on, at most the cap read
        raw = read_regular(path.parent, path.name, MAX_STATE_BYTES).decode("utf-8")
    except FileNotFoundError:
        return {}
    except ConfinedError as exc:
        raise StateFileError(str(exc)) from None
    except UnicodeDecodeError:
        raise StateFileError(f"{path}: not UTF-8 text") from None
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
    gateway's next scan) sees the old file or the new one, never half of it.
    The folders on the way are walked without following a link (missing ones
    are made), so nothing is ever written outside `path`'s folder."""
    dir_fd = open_dir(path.parent, create=True)
    try:
        write_atomic_in(dir_fd, path.name, text.encode("utf-8"))
    finally:
        os.close(dir_fd)
