"""Finding skills on disk: the roots of each source, a cheap fingerprint of
what is there, and the full scan that reads and parses every SKILL.md.

The runtime compares fingerprints (directory listings and `stat`s, no file is
read) once per turn and scans again only when one changed — never a rescan on
every call, never a stale list. Blocking file I/O: call from a worker thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agent.front_matter import definition_folders
from skills.model import BUILTIN_DIR, SKILL_FILE, SOURCE_ORDER, Skill, SkillSource
from skills.parse import SkillFormatError, parse_skill
from skills.state import StateFileError, read_disabled

__all__ = ["Fingerprint", "Invalid", "Scan", "SkillRoots", "fingerprint", "scan"]

Fingerprint = tuple[tuple[str, ...], ...]


@dataclass(frozen=True, slots=True)
class SkillRoots:
    """Where each enabled source's skill folders live, lowest precedence first."""

    dirs: tuple[tuple[SkillSource, Path], ...]
    user_state: Path
    project_state: Path

    @classmethod
    def build(
        cls,
        picobot_home: Path,
        user_home: Path,
        project: Path,
        sources: Sequence[SkillSource],
        builtin: Path | None = BUILTIN_DIR,
    ) -> SkillRoots:
        """The spec's six places; built-in skills (when `builtin`) rank below `user`."""
        places = {
            SkillSource.BUILTIN: builtin,
            SkillSource.USER: picobot_home / "skills",
            SkillSource.USER_AGENT: user_home / ".agents" / "skills",
            SkillSource.USER_OPENCLAW: user_home / ".openclaw" / "skills",
            SkillSource.PROJECT: project / ".picobot" / "skills",
            SkillSource.PROJECT_AGENT: project / ".agents" / "skills",
            SkillSource.PROJECT_OPENCLAW: project / ".openclaw" / "skills",
        }
        wanted = {SkillSource.BUILTIN, *sources}
        dirs = tuple(
            (s, path) for s in SOURCE_ORDER if s in wanted and (path := places[s]) is not None
        )
        return cls(
            dirs,
            user_state=picobot_home / "skill-state.json",
            project_state=project / ".picobot" / "skill-state.json",
        )

    def dir_of(self, source: SkillSource) -> Path | None:
        return next((path for s, path in self.dirs if s is source), None)

    @property
    def state_files(self) -> tuple[Path, Path]:
        return (self.user_state, self.project_state)


@dataclass(frozen=True, slots=True)
class Invalid:
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


def _stamp(path: Path) -> str | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return f"{info.st_mtime_ns}:{info.st_size}"


def fingerprint(roots: SkillRoots) -> Fingerprint:
    """What the scan depends on, from listings and stats only."""
    out: list[tuple[str, ...]] = []
    for source, root in roots.dirs:
        for folder in definition_folders(root):
            stamp = _stamp(folder / SKILL_FILE)
            if stamp is not None:
                out.append((source.value, str(folder), stamp))
    for state in roots.state_files:
        out.append(("state", str(state), _stamp(state) or "-"))
    return tuple(out)


def scan(roots: SkillRoots) -> Scan:
    fp = fingerprint(roots)
    found: dict[str, Skill] = {}
    invalid: list[Invalid] = []
    stamps: dict[Path, str] = {}
    for source, root in roots.dirs:
        for folder in definition_folders(root):
            path = folder / SKILL_FILE
            stamp = _stamp(path)
            if stamp is None:
                continue
            stamps[path] = stamp
            try:
                skill = parse_skill(path.read_text(encoding="utf-8"), folder, source)
            except (SkillFormatError, OSError, UnicodeDecodeError) as exc:
                invalid.append(Invalid(path, source, str(exc) or type(exc).__name__))
                continue
            found[skill.name] = skill  # a later source overrides
    disabled: set[str] = set()
    problems: list[str] = []
    for state in roots.state_files:
        try:
            disabled |= read_disabled(state)
        except (StateFileError, OSError, UnicodeDecodeError) as exc:
            problems.append(str(exc))
    skills = {n: s for n, s in sorted(found.items()) if n not in disabled}
    return Scan(skills, tuple(invalid), frozenset(disabled), tuple(problems), fp, stamps)
