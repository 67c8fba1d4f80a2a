"""Where each skill source lives, fixed once at start.

`SkillRoots.build` resolves the operator's part of every path once: the real
path of `$PICOBOT_HOME`, of the user's home and of the project. A root in the
user's home (`~/.agents/skills`) that is a symbolic link is followed then,
once, unless it leads into the project or the workspace. Below that nothing
is ever followed again: every use walks the fixed path component by
component with `O_NOFOLLOW` (agent.tools.confined), so `.agents/skills` in the
project, a skill folder or a SKILL.md that is (or later becomes) a link is
refused, never followed. Blocking (a few `lstat`s): call it at start.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from skills.model import BUILTIN_DIR, SOURCE_ORDER, SkillSource

__all__ = ["SkillRoots"]


def _real(path: Path) -> Path:
    try:
        return path.resolve(strict=False)
    except (OSError, RuntimeError):  # a link loop: left as written, the walk refuses it
        return path.absolute()


class _Fixer:
    def __init__(self, guarded: Sequence[Path]) -> None:
        self.guarded = tuple(guarded)

    def _inside(self, path: Path) -> bool:
        return any(path.is_relative_to(g) for g in self.guarded)

    def fix(self, anchor: Path, *parts: str) -> Path:
        """`anchor`'s real path joined with `parts`, the parts resolved only
        when they lie outside the project and workspace and stay outside."""
        lexical = _real(anchor).joinpath(*parts)
        if self._inside(lexical):
            return lexical  # the model may write here: walked, never resolved
        real = _real(lexical)
        return lexical if self._inside(real) else real


@dataclass(frozen=True, slots=True)
class SkillRoots:
    """Where each enabled source's skill folders live, lowest precedence first.
    Paths are fixed (see the module docstring); every use walks them."""

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
        workspace: Path | None = None,
    ) -> SkillRoots:
        """The spec's six places; built-in skills (when `builtin`) rank below `user`."""
        fixer = _Fixer([_real(p) for p in (project, workspace) if p is not None])
        places = {
            SkillSource.BUILTIN: builtin,
            SkillSource.USER: fixer.fix(picobot_home, "skills"),
            SkillSource.USER_AGENT: fixer.fix(user_home, ".agents", "skills"),
            SkillSource.USER_OPENCLAW: fixer.fix(user_home, ".openclaw", "skills"),
            SkillSource.PROJECT: fixer.fix(project, ".picobot", "skills"),
            SkillSource.PROJECT_AGENT: fixer.fix(project, ".agents", "skills"),
            SkillSource.PROJECT_OPENCLAW: fixer.fix(project, ".openclaw", "skills"),
        }
        wanted = {SkillSource.BUILTIN, *sources}
        dirs = tuple(
            (s, path) for s in SOURCE_ORDER if s in wanted and (path := places[s]) is not None
        )
        return cls(
            dirs,
            user_state=_real(picobot_home) / "skill-state.json",
            project_state=_real(project) / ".picobot" / "skill-state.json",
        )

    def dir_of(self, source: SkillSource) -> Path | None:
        return next((path for s, path in self.dirs if s is source), None)

    @property
    def state_files(self) -> tuple[Path, Path]:
        return (self.user_state, self.project_state)
