"""Skill fixtures on disk: the six sources under a fake home and project."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from skills.discovery import SkillRoots
from skills.model import SOURCE_ORDER, SkillSource

SIX = [s for s in SOURCE_ORDER if s is not SkillSource.BUILTIN]

# a YAML "alias bomb": seven lines that expand to 9**7 nodes
BOMB = """---
description: boom
a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x"]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
---
"""


@dataclass(frozen=True, slots=True)
class Layout:
    picobot_home: Path
    user_home: Path
    project: Path

    def roots(self, sources: list[SkillSource] | None = None) -> SkillRoots:
        return SkillRoots.build(
            self.picobot_home, self.user_home, self.project, SIX if sources is None else sources
        )

    def skill_dir(self, source: SkillSource) -> Path:
        root = self.roots().dir_of(source)
        assert root is not None
        return root


def layout(tmp: Path) -> Layout:
    return Layout(tmp / "picobot", tmp / "home", tmp / "project")


def write_skill(
    root: Path,
    folder: str,
    description: str | None,
    body: str = "Do it.",
    *,
    name: str | None = None,
    extra: str = "",
) -> Path:
    path = root / folder / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    front = []
    if name is not None:
        front.append(f"name: {name}")
    if description is not None:
        front.append(f"description: {description}")
    path.write_text("---\n" + "\n".join(front) + "\n" + extra + "---\n\n" + body + "\n")
    return path
