"""Opening files under a fixed root without following symbolic links.

Every component of a path is opened relative to its parent's file descriptor
(`openat`) with `O_NOFOLLOW`, from `/` for an absolute root: a link planted
anywhere along the way (by a command in the workspace, say) is refused, never
followed, so whatever is opened lies under the root as it was fixed at start.
Files are opened `O_NONBLOCK` and checked with `fstat` before a byte is read:
a FIFO, a device or a socket is refused without waiting, and a read stops at
its cap plus one byte. Every symlink is refused, even one that stays inside.

Exceptions (all `OSError`, so callers that already catch it keep working):

    ConfinedError       a path that may not be opened here ('..', absolute)
    ├── LinkRefused     a component is a symbolic link
    ├── NotRegular      not a regular file (FIFO, device, socket, directory)
    └── TooLarge        larger than the cap

Blocking file I/O: call from a worker thread, never on the event loop.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path, PurePosixPath

__all__ = [
    "ConfinedError",
    "LinkRefused",
    "NotRegular",
    "TooLarge",
    "open_beneath",
    "open_dir",
    "read_regular",
    "relative_parts",
    "write_atomic_in",
]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_CHUNK = 65_536


class ConfinedError(OSError):
    """A path that may not be opened under its root (the message says why)."""

    def __init__(self, message: str, code: int = errno.EPERM) -> None:
        super().__init__(code, message)

    def __str__(self) -> str:
        return str(self.strerror)


class LinkRefused(ConfinedError):
    def __init__(self, where: Path) -> None:
        super().__init__(f"{where} is a symbolic link (not followed)", errno.ELOOP)


class NotRegular(ConfinedError):
    def __init__(self, where: Path) -> None:
        super().__init__(f"{where} is not a regular file", errno.EINVAL)


class TooLarge(ConfinedError):
    def __init__(self, where: Path, cap: int) -> None:
        super().__init__(f"{where} is larger than {cap} bytes", errno.EFBIG)


def relative_parts(rel: str | PurePosixPath) -> tuple[str, ...]:
    """The components of a relative path; '..' and absolute paths refused."""
    path = PurePosixPath(rel)
    if path.is_absolute():
        raise ConfinedError(f"{rel} is not a relative path")
    parts = tuple(p for p in path.parts if p != ".")
    if ".." in parts:
        raise ConfinedError(f"{rel} goes up with '..'")
    return parts


def _step(dir_fd: int, name: str, flags: int, where: Path, mode: int = 0o644) -> int:
    """Open `name` in `dir_fd` without following it if it is a link."""
    try:
        return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENXIO):
            try:
                info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except OSError:
                raise exc from None
            if stat.S_ISLNK(info.st_mode):
                raise LinkRefused(where) from None
            if exc.errno != errno.ENOTDIR:  # ENXIO: a socket; ENOTDIR is plain enough
                raise NotRegular(where) from None
        raise


def _walk(fd: int, parts: tuple[str, ...], where: Path, *, create: bool) -> int:
    """Descend from `fd` (consumed) through directories `parts`; the last one's fd."""
    try:
        for part in parts:
            where = where / part
            try:
                child = _step(fd, part, _DIR_FLAGS, where)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
                child = _step(fd, part, _DIR_FLAGS, where)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_dir(path: Path, *, create: bool = False) -> int:
    """An fd of the absolute directory `path`, walked from `/` component by
    component; `create`: make missing directories (real ones) on the way."""
    if not path.is_absolute():
        raise ConfinedError(f"{path} is not an absolute path")
    parts = relative_parts(PurePosixPath(*path.parts[1:]))
    return _walk(os.open("/", _DIR_FLAGS), parts, Path("/"), create=create)


def open_beneath(
    root: Path | int,
    rel: str | PurePosixPath,
    flags: int = os.O_RDONLY,
    *,
    mode: int = 0o644,
    where: Path | None = None,
) -> int:
    """An fd of `root/rel` (root: an absolute directory or a directory fd),
    no component of either followed if it is a link. `where` names the root
    in errors when it is an fd."""
    parts = relative_parts(rel)
    if not parts:
        raise ConfinedError(f"{rel!s} names no file")
    if isinstance(root, Path):
        dir_fd, shown = open_dir(root), root
    else:
        dir_fd, shown = os.dup(root), where or Path(f"<fd {root}>")
    dir_fd = _walk(dir_fd, parts[:-1], shown, create=False)
    try:
        return _step(dir_fd, parts[-1], flags, shown.joinpath(*parts), mode)
    finally:
        os.close(dir_fd)


def read_regular(
    root: Path | int, rel: str | PurePosixPath, max_bytes: int, *, where: Path | None = None
) -> bytes:
    """The bytes of the regular file `root/rel`, at most `max_bytes` (TooLarge
    beyond); never blocks on a FIFO, never reads more than the cap plus one."""
    shown = (root if isinstance(root, Path) else where or Path(".")).joinpath(*relative_parts(rel))
    fd = open_beneath(root, rel, os.O_RDONLY | os.O_NONBLOCK, where=where)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegular(shown)
        if info.st_size > max_bytes:
            raise TooLarge(shown, max_bytes)
        data = bytearray()
        while len(data) <= max_bytes:
            chunk = os.read(fd, min(_CHUNK, max_bytes + 1 - len(data)))
            if not chunk:
                break
            data += chunk
        if len(data) > max_bytes:
            raise TooLarge(shown, max_bytes)
        return bytes(data)
    finally:
        os.close(fd)


def write_atomic_in(dir_fd: int, name: str, data: bytes, mode: int = 0o644) -> None:
    """Replace `name` in the directory `dir_fd` through a temporary file renamed
    into place: readers see the old file or the new one, and a link at `name`
    is replaced, never written through."""
    if "/" in name or name in ("", ".", ".."):
        raise ConfinedError(f"{name!r} is not a file name")
    tmp = f".{name}.{secrets.token_hex(6)}.tmp"
    fd = os.open(
        tmp,
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
        mode,
        dir_fd=dir_fd,
    )
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
