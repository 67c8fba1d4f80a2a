"""The files retention finds and deletes: the copies `send_file` queued
(gateway.delivery.files: `<media_dir>/outbox/<idempotency key>/<name>`) and
received attachments (what channels download under the media directory).

Plain blocking functions: the caller runs each in a worker thread. Symlinks
are never followed: a link is neither walked into nor taken for its target.
A file already gone counts as removed; another error leaves it for the next
pass and is counted as a failure.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import structlog

__all__ = ["OutboxCopy", "Removed", "outbox_copies", "received_files", "remove_paths"]

log = structlog.get_logger(__name__)

_KEY: Final = re.compile(r"[0-9a-f]{32}")  # gateway.bus.new_idempotency_key


@dataclass(frozen=True, slots=True)
class OutboxCopy:
    key: str  # the idempotency key of the outbox row the copy was made for
    path: Path  # its folder
    modified: float  # POSIX time of the folder's last change


@dataclass(frozen=True, slots=True)
class Removed:
    removed: int = 0
    failed: int = 0

    def __add__(self, other: Removed) -> Removed:
        return Removed(self.removed + other.removed, self.failed + other.failed)


def outbox_copies(directory: Path) -> list[OutboxCopy]:
    """Every copy folder under `directory`; anything else there is not ours."""
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return []
    copies: list[OutboxCopy] = []
    for entry in entries:
        if _KEY.fullmatch(entry.name) and entry.is_dir(follow_symlinks=False):
            try:
                modified = entry.stat(follow_symlinks=False).st_mtime
            except FileNotFoundError:
                continue
            copies.append(OutboxCopy(entry.name, Path(entry.path), modified))
    return copies


def received_files(
    roots: Sequence[Path], skip: Path, before: float, keep: Collection[str] = ()
) -> list[Path]:
    """Regular files under `roots` last modified before `before` (POSIX time),
    outside the folder `skip` and not among the paths `keep`; each file once,
    however the roots overlap."""
    found: dict[str, Path] = {}
    skipped = os.path.abspath(skip)
    kept = {os.path.abspath(p) for p in keep}
    for root in roots:
        for folder, dirs, files in os.walk(root):  # never follows a symlinked folder
            dirs[:] = [d for d in dirs if os.path.abspath(os.path.join(folder, d)) != skipped]
            for name in files:
                path = os.path.join(folder, name)
                try:
                    info = os.lstat(path)
                except FileNotFoundError:
                    continue
                where = os.path.abspath(path)
                if stat.S_ISREG(info.st_mode) and info.st_mtime < before and where not in kept:
                    found.setdefault(where, Path(path))
    return list(found.values())


def remove_paths(paths: Iterable[Path]) -> Removed:
    """Delete each file, or each folder with what is in it."""
    removed = failed = 0
    for path in paths:
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            failed += 1
            log.warning("retention_remove_failed", path=str(path), error=exc.strerror)
            continue
        removed += 1
    return Removed(removed, failed)
