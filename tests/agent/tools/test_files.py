"""The file tools: read (ranges, caps, binary refusal), write and edit, all behind the guard."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from agent.messages import ToolCall
from agent.tools.base import ToolContext, ToolError, ToolRegistry
from agent.tools.files import (
    EditArgs,
    EditTool,
    ReadArgs,
    ReadTool,
    WriteArgs,
    WriteTool,
)

MakeCtx = Callable[..., ToolContext]


async def read(ctx: ToolContext, path: str, **kw: int) -> str:
    return await ReadTool().run(ReadArgs(path=path, **kw), ctx)


async def test_read_whole_file(workspace: Path, ctx: ToolContext) -> None:
    (workspace / "notes").mkdir()
    (workspace / "notes/a.txt").write_text("héllo\nworld\n", encoding="utf-8")
    assert await read(ctx, "notes/a.txt") == "héllo\nworld\n"


async def test_read_line_range_says_where_to_continue(workspace: Path, ctx: ToolContext) -> None:
    (workspace / "n.txt").write_text("".join(f"line{i}\n" for i in range(1, 11)))
    out = await read(ctx, "n.txt", offset=3, limit=2)
    assert out == "line3\nline4\n\n[more lines follow; continue with offset=5]"
    assert await read(ctx, "n.txt", offset=10) == "line10\n"
    assert await read(ctx, "n.txt", offset=11) == "(no lines in the requested range)"


async def test_read_offset_past_end(workspace: Path, ctx: ToolContext) -> None:
    (workspace / "n.txt").write_text("a\nb\n")
    with pytest.raises(ToolError, match=r"offset 5 is past the end of n\.txt"):
        await read(ctx, "n.txt", offset=5)


async def test_read_empty_file(workspace: Path, ctx: ToolContext) -> None:
    (workspace / "e.txt").write_text("")
    assert await read(ctx, "e.txt") == "(empty file)"


async def test_read_size_cap_truncates_with_note(workspace: Path, make_ctx: MakeCtx) -> None:
    (workspace / "big.txt").write_text("".join(f"{i:04d}\n" for i in range(1000)))  # 5 B/line
    ctx = make_ctx(read_max_bytes=12)
    out = await read(ctx, "big.txt")
    assert out.startswith("0000\n0001\n00\n[truncated: output reached the 12-byte read limit")
    assert "continue with offset=3]" in out
    # Continuing from the note's offset goes on where the cut happened.
    assert (await read(ctx, "big.txt", offset=3)).startswith("0002\n0003\n00")


async def test_read_cap_does_not_split_a_multibyte_character(
    workspace: Path, make_ctx: MakeCtx
) -> None:
    (workspace / "u.txt").write_text("ab€€€", encoding="utf-8")  # € is 3 bytes
    out = await read(make_ctx(read_max_bytes=6), "u.txt")
    assert out.startswith("ab€\n[truncated")
    assert "\ufffd" not in out


async def test_read_refuses_binary(workspace: Path, ctx: ToolContext) -> None:
    (workspace / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (workspace / "latin1.txt").write_bytes("caf\xe9 cr\xe8me".encode("latin-1"))
    for name in ["img.png", "latin1.txt"]:
        with pytest.raises(ToolError, match="binary file"):
            await read(ctx, name)


async def test_read_missing_and_directory(workspace: Path, ctx: ToolContext) -> None:
    (workspace / "d").mkdir()
    with pytest.raises(ToolError, match=r"file not found: nope\.txt"):
        await read(ctx, "nope.txt")
    with pytest.raises(ToolError, match="d is a directory"):
        await read(ctx, "d")


async def test_read_refuses_escapes(workspace: Path, tmp_path: Path, ctx: ToolContext) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    (workspace / "link.txt").symlink_to(secret)
    for path in ["../secret.txt", str(secret), "link.txt", "~/.bashrc"]:
        with pytest.raises(ToolError, match="outside the workspace"):
            await read(ctx, path)


async def test_read_outside_allowed_when_unrestricted(tmp_path: Path, make_ctx: MakeCtx) -> None:
    (tmp_path / "secret.txt").write_text("visible")
    assert await read(make_ctx(restrict_to_workspace=False), "../secret.txt") == "visible"


async def test_read_refuses_non_regular_files(make_ctx: MakeCtx) -> None:
    with pytest.raises(ToolError, match="not a regular file"):
        await read(make_ctx(restrict_to_workspace=False), "/dev/zero")


async def test_read_through_the_registry_reports_errors(workspace: Path, ctx: ToolContext) -> None:
    (workspace / "a.txt").write_text("x")
    registry = ToolRegistry([ReadTool()])
    ok = await registry.execute(ToolCall("1", "read", '{"path": "a.txt"}'), ctx)
    bad = await registry.execute(ToolCall("2", "read", '{"path": "../a.txt"}'), ctx)
    zero = await registry.execute(ToolCall("3", "read", '{"path": "a.txt", "offset": 0}'), ctx)
    assert (ok.ok, ok.content) == (True, "x")
    assert (bad.ok, bad.content) == (False, "Error: path '../a.txt' is outside the workspace")
    assert not zero.ok
    assert "offset" in zero.content


async def write(ctx: ToolContext, path: str, content: str) -> str:
    return await WriteTool().run(WriteArgs(path=path, content=content), ctx)


async def edit(ctx: ToolContext, path: str, old: str, new: str) -> str:
    return await EditTool().run(EditArgs(path=path, old_text=old, new_text=new), ctx)


async def test_write_creates_parents_and_overwrites(workspace: Path, ctx: ToolContext) -> None:
    assert await write(ctx, "deep/er/f.txt", "héllo") == "wrote 6 bytes to deep/er/f.txt"
    assert (workspace / "deep/er/f.txt").read_text(encoding="utf-8") == "héllo"
    await write(ctx, "deep/er/f.txt", "new")
    assert (workspace / "deep/er/f.txt").read_text() == "new"
    assert sorted(p.name for p in (workspace / "deep/er").iterdir()) == ["f.txt"]  # no temp left


async def test_write_keeps_the_mode_of_an_existing_file(workspace: Path, ctx: ToolContext) -> None:
    script = workspace / "run.sh"
    script.write_text("old")
    script.chmod(0o755)
    await write(ctx, "run.sh", "#!/bin/sh\n")
    assert script.stat().st_mode & 0o777 == 0o755


async def test_write_refuses_escapes_and_directories(
    workspace: Path, tmp_path: Path, ctx: ToolContext
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (workspace / "link").symlink_to(outside)
    (workspace / "dir").mkdir()
    for path in ["../evil.txt", str(outside / "evil.txt"), "link/evil.txt", "~/evil.txt"]:
        with pytest.raises(ToolError, match="outside the workspace"):
            await write(ctx, path, "x")
    assert list(outside.iterdir()) == []
    with pytest.raises(ToolError, match="is a directory"):
        await write(ctx, "dir", "x")


async def test_edit_replaces_exactly_one_match(workspace: Path, ctx: ToolContext) -> None:
    (workspace / "c.py").write_text("a = 1\nb = 2\n")
    assert await edit(ctx, "c.py", "b = 2", "b = 3") == "edited c.py: replaced 1 occurrence"
    assert (workspace / "c.py").read_text() == "a = 1\nb = 3\n"


async def test_edit_zero_matches(workspace: Path, ctx: ToolContext) -> None:
    (workspace / "c.py").write_text("a = 1\n")
    with pytest.raises(ToolError) as info:
        await edit(ctx, "c.py", "zzz", "y")
    assert str(info.value) == "old_text not found in c.py"
    assert (workspace / "c.py").read_text() == "a = 1\n"


async def test_edit_multiple_matches(workspace: Path, ctx: ToolContext) -> None:
    (workspace / "c.py").write_text("x = 1\nx = 1\nx = 1\n")
    with pytest.raises(ToolError) as info:
        await edit(ctx, "c.py", "x = 1", "x = 2")
    assert str(info.value) == (
        "old_text matches 3 times in c.py; include more context to make it unique"
    )
    assert (workspace / "c.py").read_text() == "x = 1\nx = 1\nx = 1\n"


async def test_edit_counts_overlapping_matches(workspace: Path, ctx: ToolContext) -> None:
    (workspace / "a.txt").write_text("aaa")
    with pytest.raises(ToolError, match="matches 2 times"):
        await edit(ctx, "a.txt", "aa", "b")


async def test_edit_matches_crlf_files(workspace: Path, ctx: ToolContext) -> None:
    (workspace / "w.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    await edit(ctx, "w.txt", "one\ntwo", "1\n2")
    assert (workspace / "w.txt").read_bytes() == b"1\r\n2\r\nthree\r\n"


async def test_edit_refusals(workspace: Path, tmp_path: Path, ctx: ToolContext) -> None:
    (tmp_path / "out.txt").write_text("secret")
    (workspace / "bin.dat").write_bytes(b"\xff\xfe\x00x")
    with pytest.raises(ToolError, match="outside the workspace"):
        await edit(ctx, "../out.txt", "secret", "pwned")
    assert (tmp_path / "out.txt").read_text() == "secret"
    with pytest.raises(ToolError, match="not UTF-8 text"):
        await edit(ctx, "bin.dat", "x", "y")
    with pytest.raises(ToolError, match="file not found"):
        await edit(ctx, "missing.txt", "x", "y")
    with pytest.raises(ToolError, match="must not be empty"):
        await edit(ctx, "bin.dat", "", "y")


async def test_concurrent_edits_of_one_file_do_not_lose_updates(
    workspace: Path, ctx: ToolContext
) -> None:
    (workspace / "n.txt").write_text("".join(f"k{i}=0\n" for i in range(20)))
    registry = ToolRegistry([EditTool()])
    calls = [
        ToolCall(
            str(i),
            "edit",
            json.dumps({"path": "n.txt", "old_text": f"k{i}=0\n", "new_text": f"k{i}=1\n"}),
        )
        for i in range(20)
    ]
    results = await registry.execute_batch(calls, ctx)
    assert all(r.ok for r in results), [r.content for r in results if not r.ok]
    assert (workspace / "n.txt").read_text() == "".join(f"k{i}=1\n" for i in range(20))
