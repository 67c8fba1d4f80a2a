"""The workspace path guard shared by the file tools.

`resolve_in_workspace` turns a path the model gave into an absolute path and,
when `restrict_to_workspace` is on, refuses anything that lands outside the
workspace: `..` escapes, `~` expansion, absolute paths and symlinks pointing
out. It touches the filesystem (symlink resolution), so call it from a worker
thread, never directly on the event loop.

`beneath_read_root` tells whether an absolute or `~` path lies under one of
`settings.read_roots` (the skill folders, the media folder: real paths fixed at
start). It is lexical and never resolves a link: the caller opens the file
with `agent.tools.confined`, which walks the root from `/` and refuses every
link on the way, so a root swapped for a link later (`ln -s / .agents/skills`)
is refused, not followed.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path, PurePosixPath

from agent.tools.base import ToolError, ToolSettings
from agent.tools.confined import open_beneath

__all__ = [
    "beneath_read_root",
    "real_path",
    "resolve_for_read",
    "resolve_in_workspace",
    "workspace_root",
]


def workspace_root(settings: ToolSettings) -> Path:
    """The workspace as an absolute path with every symlink resolved."""
    return settings.workspace.expanduser().resolve(strict=False)


def real_path(path: Path) -> Path:
    """`path` made absolute with every symlink followed, as far as it exists;
    OSError for a symlink loop, on every Python: 3.11 and 3.12 raise
    RuntimeError there, 3.13 returns the path through the loop as it stands,
    which leaves a symlink in it."""
    try:
        real = path.resolve(strict=False)
    except RuntimeError as exc:
        raise OSError(errno.ELOOP, str(exc)) from None
    if any(p.is_symlink() for p in (real, *real.parents)):
        raise OSError(errno.ELOOP, f"symlink loop in {path}")
    return real


def _outside(path: str) -> ToolError:
    return ToolError(f"path {path!r} is outside the workspace")


def _expand_user(path: str) -> str:
    if not path.startswith("~"):
        return path
    expanded = os.path.expanduser(path)
    if expanded == path:  # `~user` of an unknown user: never treat it as a file name
        raise ToolError(f"cannot expand {path!r}")
    return expanded


def _check_components(resolved: Path, root: Path, original: str) -> None:
    """Re-check every existing component below the root for a symlink leading out.

    `resolve()` has already followed links; this catches a link that was
    swapped in between, at the cost of a few lstat calls.
    """
    current = root
    for part in resolved.relative_to(root).parts:
        current = current / part
        if current.is_symlink():
            try:
                target = real_path(current)
            except OSError:
                raise _outside(original) from None
            if not target.is_relative_to(root):
                raise _outside(original)
        elif not current.exists():
            break


def resolve_in_workspace(path: str, settings: ToolSettings) -> Path:
    """Resolve `path` (relative to the workspace) under the configured policy."""
    if not path or "\x00" in path:
        raise ToolError("path must be a non-empty string without NUL characters")
    root = workspace_root(settings)
    try:
        candidate = Path(_expand_user(path))
    except ToolError:
        if settings.restrict_to_workspace:
            raise _outside(path) from None
        raise
    if not candidate.is_absolute():
        candidate = root / candidate
    try:
        resolved = real_path(candidate)
    except OSError:  # symlink loop, unreadable directory
        raise ToolError(f"cannot resolve path {path!r}") from None
    if not settings.restrict_to_workspace:
        return resolved
    if not resolved.is_relative_to(root):
        raise _outside(path)
    _check_components(resolved, root, path)
    return resolved


def beneath_read_root(path: str, settings: ToolSettings) -> tuple[Path, PurePosixPath] | None:
    """The read root an absolute or `~` `path` lies under, and the part below
    it; None if none. Nothing on disk is looked at."""
    try:
        candidate = Path(_expand_user(path))
    except ToolError:
        return None
    if not candidate.is_absolute() or ".." in candidate.parts:
        return None
    for root in settings.read_roots:
        if root.is_absolute() and candidate.is_relative_to(root) and candidate != root:
            return root, PurePosixPath(candidate.relative_to(root))
    return None


def resolve_for_read(path: str, settings: ToolSettings) -> Path:
    """Like `resolve_in_workspace`, but a path under one of `settings.read_roots`
    is accepted too when it is a regular file reached without any link (checked
    by opening it through `agent.tools.confined`). Prefer opening the file
    with `open_beneath` directly where the caller reads it itself."""
    try:
        return resolve_in_workspace(path, settings)
    except ToolError:
        beneath = beneath_read_root(path, settings)
        if beneath is None:
            raise
    root, rel = beneath
    try:
        fd = open_beneath(root, rel, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise ToolError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ToolError(f"{path} is not a regular file")
    finally:
        os.close(fd)
    return root / rel
