"""Finding skills on disk: a cheap fingerprint of what is there, and the full
scan that reads and parses every SKILL.md.

The runtime compares fingerprints (directory listings and `lstat`s, no file
is opened) and scans again only when one changed. Every root is walked from
`/` without following a link (agent.tools.confined): a root that is a link
is reported as a problem, a skill folder or SKILL.md that is a link, a FIFO,
a device or larger than `MAX_SKILL_BYTES` is reported as invalid and skipped,
without waiting and without reading more than the cap. Blocking file I/O:
call from a worker thread.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from agent.tools.confined import ConfinedError, open_dir, read_regular
from skills.model import SKILL_FILE, Skill, SkillSource
from skills.parse import SkillFormatError, parse_skill
from skills.roots import SkillRoots
from skills.state import StateFileError, read_disabled

__all__ = [
    "MAX_SKILL_BYTES",
    "Fingerprint",
    "Invalid",
    "Lenient",
    "Scan",
    "SkillRoots",
    "fingerprint",
    "scan",
]

Fingerprint = tuple[tuple[str, ...], ...]
MAX_SKILL_BYTES = 256 * 1024
_LINK = "link"


@dataclass(frozen=True, slots=True)
class Invalid:
    path: Path
    source: SkillSource
    reason: str


@dataclass(frozen=True, slots=True)
class Lenient:
    """A SKILL.md loaded although it breaks a rule; `reason` says which."""

    path: Path
    source: SkillSource
    reason: str


@dataclass(frozen=True, slots=True)
class Scan:
    """The effective skills (winners of each name, disabled ones taken out)."""

    skills: dict[str, Skill]
    invalid: tuple[Invalid, ...]
    disabled: frozenset[str]
    problems: tuple[str, ...]  # unreadable state files
    fingerprint: Fingerprint
    stamps: dict[Path, str]  # SKILL.md → its stat stamp, to tell a changed skill
    refused: tuple[str, ...] = ()  # roots not read (a link, unreadable), with why
    lenient: tuple[Lenient, ...] = ()  # loaded with a warning (overridden ones too)
    # the skills found on disk but disabled in a state file (winner of each name)
    off: dict[str, Skill] = field(default_factory=dict)


def _stamp(info: os.stat_result) -> str:
    return f"{stat.S_IFMT(info.st_mode):o}:{info.st_mtime_ns}:{info.st_size}"


@dataclass(frozen=True, slots=True)
class _Listing:
    """One root: its skill folders (name → SKILL.md stamp, or `_LINK`)."""

    stamps: dict[str, str]
    problem: str | None = None


def _list_root(root: Path, dir_fd: int) -> _Listing:
    stamps: dict[str, str] = {}
    with os.scandir(dir_fd) as entries:
        for entry in entries:
            if entry.name.startswith("."):
                continue
            if entry.is_symlink():
                stamps[entry.name] = _LINK
            elif entry.is_dir(follow_symlinks=False):
                try:  # lstat only: the file is never opened here
                    info = os.stat(
                        f"{entry.name}/{SKILL_FILE}", dir_fd=dir_fd, follow_symlinks=False
                    )
                except OSError:
                    continue
                stamps[entry.name] = _stamp(info)
    return _Listing(dict(sorted(stamps.items())))


def _open_root(root: Path) -> int | _Listing:
    try:
        return open_dir(root)
    except (FileNotFoundError, NotADirectoryError):
        return _Listing({})
    except OSError as exc:
        return _Listing({}, f"skill folder {root} not read: {exc.strerror or exc}")


def _listing(root: Path) -> _Listing:
    opened = _open_root(root)
    if isinstance(opened, _Listing):
        return opened
    try:
        return _list_root(root, opened)
    except OSError as exc:
        return _Listing({}, f"skill folder {root} not read: {exc.strerror or exc}")
    finally:
        os.close(opened)


def _state_stamp(path: Path) -> str:
    try:
        return _stamp(os.stat(path, follow_symlinks=False))
    except OSError:
        return "-"


def fingerprint(roots: SkillRoots) -> Fingerprint:
    """What the scan depends on, from listings and `lstat`s only."""
    out: list[tuple[str, ...]] = []
    for source, root in roots.dirs:
        listing = _listing(root)
        if listing.problem:
            out.append(("problem", listing.problem))
        out += [(source.value, str(root / n), s) for n, s in listing.stamps.items()]
    out += [("state", str(state), _state_stamp(state)) for state in roots.state_files]
    return tuple(out)


def _read_skill(dir_fd: int, root: Path, name: str, source: SkillSource) -> Skill:
    raw = read_regular(dir_fd, f"{name}/{SKILL_FILE}", MAX_SKILL_BYTES, where=root)
    return parse_skill(raw.decode("utf-8"), root / name, source)


def _scan_root(
    source: SkillSource,
    root: Path,
    found: dict[str, Skill],
    invalid: list[Invalid],
    lenient: list[Lenient],
) -> _Listing:
    opened = _open_root(root)
    if isinstance(opened, _Listing):
        return opened
    try:
        listing = _list_root(root, opened)
        for name, stamp in listing.stamps.items():
            path = root / name / SKILL_FILE
            if stamp == _LINK:
                reason = f"the skill folder {root / name} is a symbolic link (not followed)"
                invalid.append(Invalid(path, source, reason))
                continue
            try:
                skill = _read_skill(opened, root, name, source)
            except (SkillFormatError, ConfinedError) as exc:
                invalid.append(Invalid(path, source, str(exc)))
                continue
            except (OSError, UnicodeDecodeError) as exc:
                invalid.append(Invalid(path, source, str(exc) or type(exc).__name__))
                continue
            if skill.warning is not None:
                lenient.append(Lenient(path, source, skill.warning))
            found[skill.name] = skill  # a later source overrides
        return listing
    except OSError as exc:
        return _Listing({}, f"skill folder {root} not read: {exc.strerror or exc}")
    finally:
        os.close(opened)


def scan(roots: SkillRoots) -> Scan:
    fp = fingerprint(roots)
    found: dict[str, Skill] = {}
    invalid: list[Invalid] = []
    lenient: list[Lenient] = []
    stamps: dict[Path, str] = {}
    refused: list[str] = []
    for source, root in roots.dirs:
        listing = _scan_root(source, root, found, invalid, lenient)
        if listing.problem:
            refused.append(listing.problem)
        stamps |= {root / n / SKILL_FILE: s for n, s in listing.stamps.items()}
    disabled: set[str] = set()
    problems: list[str] = []
    for state in roots.state_files:
        try:
            disabled |= read_disabled(state)
        except (StateFileError, OSError, UnicodeDecodeError) as exc:
            problems.append(str(exc))
    skills = {n: s for n, s in sorted(found.items()) if n not in disabled}
    off = {n: s for n, s in sorted(found.items()) if n in disabled}
    return Scan(
        skills,
        tuple(invalid),
        frozenset(disabled),
        tuple(problems),
        fp,
        stamps,
        tuple(refused),
        tuple(lenient),
        off,
    )
