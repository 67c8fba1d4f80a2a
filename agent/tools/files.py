"""The file tools `read`, `write` and `edit`, confined by the workspace path guard.

Every filesystem call runs in a worker thread (`asyncio.to_thread`); nothing
here may block the event loop. Paths always go through `resolve_in_workspace`.
"""

from __future__ import annotations

import asyncio
import codecs
import stat
from pathlib import Path
from typing import BinaryIO, ClassVar

from pydantic import Field

from agent.tools.base import Tool, ToolArgs, ToolContext, ToolError, ToolSettings
from agent.tools.paths import resolve_in_workspace

__all__ = ["ReadTool"]

_SNIFF_BYTES = 8192
_SKIP_CHUNK = 65_536


def _open_regular(path: str, settings: ToolSettings) -> tuple[Path, BinaryIO]:
    target = resolve_in_workspace(path, settings)
    try:
        info = target.stat()
    except FileNotFoundError:
        raise ToolError(f"file not found: {path}") from None
    except OSError as exc:
        raise ToolError(f"cannot access {path}: {exc.strerror}") from None
    if stat.S_ISDIR(info.st_mode):
        raise ToolError(f"{path} is a directory, not a file")
    if not stat.S_ISREG(info.st_mode):
        raise ToolError(f"{path} is not a regular file")
    try:
        return target, target.open("rb")
    except OSError as exc:
        raise ToolError(f"cannot open {path}: {exc.strerror}") from None


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
    _, handle = _open_regular(path, settings)
    with handle:
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
    path: str = Field(description="File path, relative to the workspace")
    offset: int = Field(default=1, ge=1, description="First line to read (1-based)")
    limit: int | None = Field(default=None, ge=1, description="Maximum number of lines to read")


class ReadTool(Tool[ReadArgs]):
    name: ClassVar[str] = "read"
    description: ClassVar[str] = (
        "Read a UTF-8 text file from the workspace. Use offset/limit (lines) for large files; "
        "output is capped and says where to continue."
    )
    Args: ClassVar[type[ToolArgs]] = ReadArgs

    async def run(self, args: ReadArgs, ctx: ToolContext) -> str:
        return await asyncio.to_thread(read_text, args.path, ctx.settings, args.offset, args.limit)
