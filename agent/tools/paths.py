"""The workspace path guard shared by the file tools.

`resolve_in_workspace` turns a path the model gave into an absolute path and,
when `restrict_to_workspace` is on, refuses anything that lands outside the
workspace: `..` escapes, `~` expansion, absolute paths and symlinks pointing
out. `resolve_for_read` also lets `read` into `settings.read_roots` (the skill
folders), by absolute or `~` path. It touches the filesystem (symlink resolution), so call it from a worker
thread, never directly on the event loop.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from agent.tools.base import ToolError, ToolSettings

__all__ = ["real_path", "resolve_for_read", "resolve_in_workspace", "workspace_root"]


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


def resolve_for_read(path: str, settings: ToolSettings) -> Path:
    """Like `resolve_in_workspace`, but an absolute path under one of
    `settings.read_roots` is accepted too (with the same symlink checks)."""
    try:
        return resolve_in_workspace(path, settings)
    except ToolError:
        if not settings.read_roots:
            raise
        try:
            candidate = Path(_expand_user(path))
            resolved = real_path(candidate) if candidate.is_absolute() else None
        except (ToolError, OSError):
            resolved = None
        for root in settings.read_roots if resolved is not None else ():
            base = root.expanduser().resolve(strict=False)
            if resolved is not None and resolved.is_relative_to(base):
                _check_components(resolved, base, path)
                return resolved
        raise
