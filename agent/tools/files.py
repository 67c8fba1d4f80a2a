"""The file tools `read`, `write` and `edit`, confined by the workspace path guard.

Every filesystem call runs in a worker thread (`asyncio.to_thread`); nothing
here may block the event loop. Paths always go through `resolve_in_workspace`;
`read` may also open files under the read roots (skill and media folders),
only through `agent.tools.confined` (no link followed). Files are opened
`O_NONBLOCK` and checked with `fstat`: a FIFO is refused, never waited on.
"""

from __future__ import annotations

import asyncio
import codecs
import io
import os
import stat
import tempfile
import threading
from pathlib import Path
from typing import BinaryIO, ClassVar

from pydantic import Field

from agent.tools.base import Tool, ToolArgs, ToolContext, ToolError, ToolSettings
from agent.tools.confined import ConfinedError, open_beneath
from agent.tools.paths import beneath_read_root, resolve_in_workspace, workspace_root
from agent.tools.pdf_text import is_pdf, pdf_text

__all__ = ["EditTool", "ReadTool", "WriteTool"]

_SNIFF_BYTES = 8192
_SKIP_CHUNK = 65_536
EDIT_MAX_BYTES = 10_000_000
PDF_MAX_BYTES = 30_000_000

# Serialises write/edit (which run in worker threads) so two calls of one batch
# cannot interleave a read-modify-write on the same file.
_write_lock = threading.Lock()


def _checked(fd: int, path: str) -> BinaryIO:
    """`fd` as a file if it is a regular one (else closed and refused)."""
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise ToolError(f"{path} is a directory, not a file")
        if not stat.S_ISREG(info.st_mode):
            raise ToolError(f"{path} is not a regular file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _open_in_read_root(path: str, settings: ToolSettings, refused: ToolError) -> BinaryIO:
    beneath = beneath_read_root(path, settings)
    if beneath is None:
        raise refused
    root, rel = beneath
    try:
        fd = open_beneath(root, rel, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise ToolError(f"file not found: {path}") from None
    except ConfinedError as exc:
        raise ToolError(f"cannot read {path}: {exc}") from None
    except OSError as exc:
        raise ToolError(f"cannot open {path}: {exc.strerror}") from None
    return _checked(fd, path)


def _open_regular(
    path: str, settings: ToolSettings, *, reading: bool = False
) -> tuple[Path, BinaryIO]:
    try:
        target = resolve_in_workspace(path, settings)
    except ToolError as refused:
        if not reading:  # only `read` may reach the read-only roots, never edit
            raise
        return Path(path), _open_in_read_root(path, settings, refused)
    try:  # O_NONBLOCK: a FIFO swapped in after the path check is not waited on
        fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise ToolError(f"file not found: {path}") from None
    except OSError as exc:
        raise ToolError(f"cannot open {path}: {exc.strerror}") from None
    if settings.restrict_to_workspace and not _opened_inside(fd, workspace_root(settings)):
        os.close(fd)  # a link swapped in between the check and the open
        raise ToolError(f"path {path!r} is outside the workspace")
    return target, _checked(fd, path)


def _opened_inside(fd: int, root: Path) -> bool:
    """Whether the file open at `fd` lies under `root` (what the kernel
    opened, after every link); True where /proc cannot tell."""
    try:
        opened = Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        return True
    return opened.is_relative_to(root)


def _refuse_binary(handle: BinaryIO, path: str) -> None:
    sample = handle.read(_SNIFF_BYTES)
    handle.seek(0)
    binary = b"\x00" in sample
    if not binary:
        try:  # final=False: a multibyte character cut at the sample's end is fine
            codecs.getincrementaldecoder("utf-8")().decode(sample, final=False)
        except UnicodeDecodeError:
            binary = True
    if binary:
        raise ToolError(f"{path} looks like a binary file (not UTF-8 text); refusing to read it")


def _pdf_as_text(handle: BinaryIO, path: str) -> BinaryIO | None:
    """A PDF (a received document, typically) is read as the text it shows."""
    if not is_pdf(handle.read(8)):
        handle.seek(0)
        return None
    handle.seek(0)
    data = handle.read(PDF_MAX_BYTES + 1)
    if len(data) > PDF_MAX_BYTES:
        raise ToolError(f"{path} is a PDF larger than {PDF_MAX_BYTES} bytes; read refuses it")
    text = pdf_text(data)
    if not text:
        raise ToolError(f"{path} is a PDF without extractable text (scanned, or unusual fonts)")
    return io.BytesIO(f"[text extracted from the PDF {Path(path).name}]\n{text}\n".encode())


def _skip_lines(handle: BinaryIO, count: int) -> int:
    """Skip `count` lines; return how many were actually skipped."""
    skipped = 0
    while skipped < count:
        chunk = handle.readline(_SKIP_CHUNK)
        if not chunk:
            break
        if chunk.endswith(b"\n"):
            skipped += 1
    return skipped


def read_text(path: str, settings: ToolSettings, offset: int, limit: int | None) -> str:
    """Read lines `offset`.. (1-based) of a text file, at most `read_max_bytes` bytes."""
    budget = settings.read_max_bytes
    _, opened = _open_regular(path, settings, reading=True)
    with opened:
        handle = _pdf_as_text(opened, path) or opened
        _refuse_binary(handle, path)
        if _skip_lines(handle, offset - 1) < offset - 1:
            raise ToolError(f"offset {offset} is past the end of {path}")
        collected = bytearray()
        lines = 0
        cut = False
        while limit is None or lines < limit:
            chunk = handle.readline(budget - len(collected) + 1)
            if not chunk:
                break
            if len(collected) + len(chunk) > budget:
                collected += chunk[: budget - len(collected)]
                cut = True
                break
            collected += chunk
            lines += 1
        more = cut or bool(handle.read(1))
    text = codecs.getincrementaldecoder("utf-8")(errors="replace").decode(
        bytes(collected), final=not cut
    )
    next_line = offset + lines
    if cut:
        text += (
            f"\n[truncated: output reached the {budget}-byte read limit in line {next_line}; "
            f"continue with offset={next_line}]"
        )
    elif more:
        text += f"\n[more lines follow; continue with offset={next_line}]"
    elif not collected:
        text = "(empty file)" if offset == 1 else "(no lines in the requested range)"
    return text


class ReadArgs(ToolArgs):
    path: str
    offset: int = Field(default=1, ge=1, description="1-based")
    limit: int | None = Field(default=None, ge=1)


class ReadTool(Tool[ReadArgs]):
    name: ClassVar[str] = "read"
    description: ClassVar[str] = (
        "Read a text file (or a PDF's text) in the workspace or a received attachment. "
        "Output is capped and says where to go on (offset, limit: lines)."
    )
    Args: ClassVar[type[ToolArgs]] = ReadArgs

    async def run(self, args: ReadArgs, ctx: ToolContext) -> str:
        return await asyncio.to_thread(read_text, args.path, ctx.settings, args.offset, args.limit)


def _write_atomic(target: Path, data: bytes) -> None:
    """Replace `target` with `data` via a temp file + rename (no half-written files)."""
    mode = stat.S_IMODE(target.stat().st_mode) if target.exists() else 0o644
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text(path: str, content: str, settings: ToolSettings) -> str:
    target = resolve_in_workspace(path, settings)
    data = content.encode("utf-8")
    with _write_lock:
        if target.is_dir():
            raise ToolError(f"{path} is a directory, not a file")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            _write_atomic(target, data)
        except OSError as exc:
            raise ToolError(f"cannot write {path}: {exc.strerror}") from None
    return f"wrote {len(data)} bytes to {path}"


def _count_overlapping(text: str, needle: str) -> int:
    count, start = 0, text.find(needle)
    while start != -1:
        count += 1
        start = text.find(needle, start + 1)
    return count


def edit_text(path: str, old_text: str, new_text: str, settings: ToolSettings) -> str:
    if not old_text:
        raise ToolError("old_text must not be empty")
    with _write_lock:
        target, handle = _open_regular(path, settings)
        with handle:
            raw = handle.read(EDIT_MAX_BYTES + 1)
        if len(raw) > EDIT_MAX_BYTES:
            raise ToolError(f"{path} is larger than {EDIT_MAX_BYTES} bytes; edit refuses it")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(f"{path} is not UTF-8 text; edit refuses it") from None
        matches = _count_overlapping(text, old_text)
        if matches == 0 and "\r\n" in text and "\n" in old_text and "\r\n" not in old_text:
            # Models write "\n"; retry against the file's CRLF line endings.
            crlf_old = old_text.replace("\n", "\r\n")
            matches = _count_overlapping(text, crlf_old)
            if matches:
                old_text, new_text = crlf_old, new_text.replace("\n", "\r\n")
        if matches == 0:
            raise ToolError(f"old_text not found in {path}")
        if matches > 1:
            raise ToolError(
                f"old_text matches {matches} times in {path}; "
                "include more context to make it unique"
            )
        try:
            _write_atomic(target, text.replace(old_text, new_text, 1).encode("utf-8"))
        except OSError as exc:
            raise ToolError(f"cannot write {path}: {exc.strerror}") from None
    return f"edited {path}: replaced 1 occurrence"


class WriteArgs(ToolArgs):
    path: str
    content: str = Field(description="the whole new content")


class WriteTool(Tool[WriteArgs]):
    name: ClassVar[str] = "write"
    description: ClassVar[str] = (
        "Write a text file in the workspace (creating folders), replacing its content."
    )
    Args: ClassVar[type[ToolArgs]] = WriteArgs

    async def run(self, args: WriteArgs, ctx: ToolContext) -> str:
        return await asyncio.to_thread(write_text, args.path, args.content, ctx.settings)


class EditArgs(ToolArgs):
    path: str
    old_text: str
    new_text: str


class EditTool(Tool[EditArgs]):
    name: ClassVar[str] = "edit"
    description: ClassVar[str] = (
        "In a workspace file, replace old_text (it must occur exactly once: include "
        "nearby lines) with new_text."
    )
    Args: ClassVar[type[ToolArgs]] = EditArgs

    async def run(self, args: EditArgs, ctx: ToolContext) -> str:
        return await asyncio.to_thread(
            edit_text, args.path, args.old_text, args.new_text, ctx.settings
        )
