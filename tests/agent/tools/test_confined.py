"""agent.tools.confined: opening under a root without following links, FIFOs
refused without waiting, reads capped; and `read` through the read roots."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from agent.tools import files as files_module
from agent.tools.base import ToolContext, ToolError, ToolSettings
from agent.tools.confined import (
    ConfinedError,
    LinkRefused,
    NotRegular,
    TooLarge,
    open_beneath,
    open_dir,
    read_regular,
    write_atomic_in,
)
from agent.tools.files import ReadArgs, ReadTool
from tests.agent.tools.conftest import MakeCtx


@pytest.fixture
def root(tmp_path: Path) -> Path:
    base = tmp_path.resolve() / "root"
    (base / "sub").mkdir(parents=True)
    (base / "sub" / "a.txt").write_text("inside")
    return base


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path.resolve() / "outside" / "secret.txt"
    path.parent.mkdir()
    path.write_text("secret-7f7f")
    return path


def test_a_plain_file_is_read(root: Path) -> None:
    assert read_regular(root, "sub/a.txt", 100) == b"inside"


def test_a_symlinked_component_is_refused(root: Path, secret: Path) -> None:
    (root / "dirlink").symlink_to(secret.parent)
    (root / "sub" / "filelink").symlink_to(secret)
    with pytest.raises(LinkRefused, match="dirlink is a symbolic link"):
        read_regular(root, "dirlink/secret.txt", 100)
    with pytest.raises(LinkRefused, match="filelink is a symbolic link"):
        read_regular(root, "sub/filelink", 100)
    # a link that stays inside is refused too (documented: every link)
    (root / "inner").symlink_to(root / "sub")
    with pytest.raises(LinkRefused):
        read_regular(root, "inner/a.txt", 100)


def test_a_root_that_became_a_link_is_refused(tmp_path: Path, secret: Path) -> None:
    """`ln -s / .agents/skills` after start: the fixed path is walked from `/`."""
    project = tmp_path.resolve() / "project"
    (project / ".agents").mkdir(parents=True)
    (project / ".agents" / "skills").symlink_to("/")
    with pytest.raises(LinkRefused, match=r"\.agents/skills is a symbolic link"):
        read_regular(project / ".agents" / "skills", str(secret).lstrip("/"), 100)
    with pytest.raises(LinkRefused):
        open_dir(project / ".agents" / "skills", create=True)


def test_dot_dot_and_absolute_paths_are_refused(root: Path, secret: Path) -> None:
    with pytest.raises(ConfinedError, match=r"'\.\.'"):
        read_regular(root, "../outside/secret.txt", 100)
    with pytest.raises(ConfinedError, match=r"'\.\.'"):
        read_regular(root, "sub/../../outside/secret.txt", 100)
    with pytest.raises(ConfinedError, match="not a relative path"):
        open_beneath(root, str(secret))


async def test_a_fifo_is_refused_without_waiting(root: Path) -> None:
    fifo = root / "sub" / "SKILL.md"
    os.mkfifo(fifo)
    try:
        async with asyncio.timeout(5):
            with pytest.raises(NotRegular, match="not a regular file"):
                await asyncio.to_thread(read_regular, root, "sub/SKILL.md", 100)
    finally:  # were the open waiting for a writer, this lets it go
        fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
        os.close(fd)


def test_a_link_to_dev_zero_is_refused(root: Path) -> None:
    (root / "zero").symlink_to("/dev/zero")
    with pytest.raises(LinkRefused):
        read_regular(root, "zero", 100)


def test_size_cap(root: Path) -> None:
    (root / "big").write_bytes(b"x" * 101)
    (root / "fits").write_bytes(b"x" * 100)
    with pytest.raises(TooLarge, match="larger than 100 bytes"):
        read_regular(root, "big", 100)
    assert len(read_regular(root, "fits", 100)) == 100
    sparse = root / "sparse"
    with sparse.open("wb") as f:
        f.truncate(300_000_000)
    with pytest.raises(TooLarge):
        read_regular(root, "sparse", 256 * 1024)


def test_create_makes_real_folders_and_writes_replace_links(root: Path, secret: Path) -> None:
    fd = open_dir(root / "new" / "deeper", create=True)
    try:
        (root / "new" / "deeper" / "target").symlink_to(secret)
        write_atomic_in(fd, "target", b"fresh")
    finally:
        os.close(fd)
    assert (root / "new" / "deeper").is_dir()
    assert not (root / "new" / "deeper" / "target").is_symlink()
    assert (root / "new" / "deeper" / "target").read_bytes() == b"fresh"
    assert secret.read_text() == "secret-7f7f"


async def test_read_tool_refuses_a_read_root_swapped_for_a_link(
    make_ctx: MakeCtx, workspace: Path, secret: Path
) -> None:
    skills = workspace.resolve() / ".agents" / "skills"
    (skills / "demo").mkdir(parents=True)
    (skills / "demo" / "notes.md").write_text("skill notes")
    ctx: ToolContext = make_ctx(read_roots=(skills,))
    tool = ReadTool()
    assert await tool.run(ReadArgs(path=str(skills / "demo" / "notes.md")), ctx) == "skill notes"
    for entry in (skills / "demo").iterdir():
        entry.unlink()
    (skills / "demo").rmdir()
    skills.rmdir()
    skills.symlink_to("/")
    for path in (str(skills) + str(secret), ".agents/skills" + str(secret), str(secret)):
        with pytest.raises(ToolError) as refused:
            await tool.run(ReadArgs(path=path), ctx)
        assert "secret-7f7f" not in str(refused.value)


async def test_read_tool_refuses_a_fifo_in_the_workspace(ctx: ToolContext, workspace: Path) -> None:
    os.mkfifo(workspace / "pipe")
    try:
        async with asyncio.timeout(5):
            with pytest.raises(ToolError, match="not a regular file"):
                await ReadTool().run(ReadArgs(path="pipe"), ctx)
    finally:
        os.close(os.open(workspace / "pipe", os.O_RDWR | os.O_NONBLOCK))


async def test_read_refuses_a_link_swapped_in_after_the_path_check(
    ctx: ToolContext, workspace: Path, secret: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race of a command running beside `read`: the path is checked while
    it is a plain file, then replaced by a link out before it is opened."""
    (workspace / "note.txt").write_text("harmless")
    checked = files_module.resolve_in_workspace

    def check_then_swap(path: str, settings: ToolSettings) -> Path:
        target = checked(path, settings)
        (workspace / "note.txt").unlink()
        (workspace / "note.txt").symlink_to(secret)
        return target

    monkeypatch.setattr(files_module, "resolve_in_workspace", check_then_swap)
    with pytest.raises(ToolError, match="outside the workspace") as refused:
        await ReadTool().run(ReadArgs(path="note.txt"), ctx)
    assert "secret-7f7f" not in str(refused.value)
