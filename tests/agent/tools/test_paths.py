"""The workspace path guard: what resolves inside, and every way out that is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.tools.base import ToolError, ToolSettings
from agent.tools.paths import real_path, resolve_in_workspace


@pytest.fixture
def settings(workspace: Path) -> ToolSettings:
    return ToolSettings(workspace=workspace)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    out = tmp_path / "outside"
    out.mkdir()
    (out / "secret.txt").write_text("secret")
    return out


def test_relative_paths_resolve_in_the_workspace(workspace: Path, settings: ToolSettings) -> None:
    assert resolve_in_workspace("notes/a.txt", settings) == workspace.resolve() / "notes/a.txt"
    assert resolve_in_workspace("./a/../b.txt", settings) == workspace.resolve() / "b.txt"


def test_absolute_path_inside_is_allowed(workspace: Path, settings: ToolSettings) -> None:
    target = workspace / "x.txt"
    assert resolve_in_workspace(str(target), settings) == target.resolve()


def test_symlink_inside_pointing_inside_is_allowed(workspace: Path, settings: ToolSettings) -> None:
    (workspace / "real").mkdir()
    (workspace / "alias").symlink_to(workspace / "real")
    assert resolve_in_workspace("alias/f.txt", settings) == workspace.resolve() / "real/f.txt"


@pytest.mark.parametrize("path", ["../outside/secret.txt", "a/../../outside", "..", "/etc/passwd"])
def test_escapes_are_refused(settings: ToolSettings, path: str) -> None:
    with pytest.raises(ToolError, match="is outside the workspace"):
        resolve_in_workspace(path, settings)


def test_absolute_path_outside_is_refused(settings: ToolSettings, outside: Path) -> None:
    with pytest.raises(ToolError, match="is outside the workspace"):
        resolve_in_workspace(str(outside / "secret.txt"), settings)


@pytest.mark.parametrize("path", ["~", "~/x.txt", "~root/x", "~no_such_user_picobot/x"])
def test_home_expansion_is_refused(
    settings: ToolSettings, path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    with pytest.raises(ToolError, match="is outside the workspace"):
        resolve_in_workspace(path, settings)


def test_symlink_pointing_outside_is_refused(
    workspace: Path, settings: ToolSettings, outside: Path
) -> None:
    (workspace / "link").symlink_to(outside)
    (workspace / "filelink").symlink_to(outside / "secret.txt")
    (workspace / "dangling").symlink_to(outside / "not-yet-there.txt")
    for path in ["link/secret.txt", "link", "filelink", "dangling"]:
        with pytest.raises(ToolError, match="is outside the workspace"):
            resolve_in_workspace(path, settings)


def test_symlink_loop_is_a_tool_error(workspace: Path, settings: ToolSettings) -> None:
    (workspace / "a").symlink_to(workspace / "b")
    (workspace / "b").symlink_to(workspace / "a")
    with pytest.raises(ToolError, match="cannot resolve"):
        resolve_in_workspace("a/x", settings)
    for path in (workspace / "a", workspace / "a" / "x"):  # on every Python
        with pytest.raises(OSError, match="ymlink loop"):
            real_path(path)
    assert real_path(workspace / "c" / ".." / "d") == workspace.resolve() / "d"


def test_nul_and_empty_paths_are_refused(settings: ToolSettings) -> None:
    for path in ["", "a\x00b"]:
        with pytest.raises(ToolError, match="non-empty"):
            resolve_in_workspace(path, settings)


def test_unrestricted_allows_outside_and_expands_home(
    workspace: Path, outside: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    settings = ToolSettings(workspace=workspace, restrict_to_workspace=False)
    assert resolve_in_workspace("~/x.txt", settings) == home.resolve() / "x.txt"
    assert (
        resolve_in_workspace("../outside/secret.txt", settings)
        == (outside / "secret.txt").resolve()
    )
    assert resolve_in_workspace(str(outside), settings) == outside.resolve()
    assert resolve_in_workspace("rel.txt", settings) == workspace.resolve() / "rel.txt"


def test_workspace_under_home_accepts_tilde_paths_into_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / "ws").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    settings = ToolSettings(workspace=Path("~/ws"))
    assert resolve_in_workspace("~/ws/a.txt", settings) == (home / "ws/a.txt").resolve()
