"""The sandbox argv (agent/tools/sandbox.py) and its resolution at start-up."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.tools.sandbox import Sandbox
from gateway.lifecycle import StartupError
from gateway.ops.hardening import resolve_sandbox
from tests.support import make_config


def test_no_bwrap_runs_the_command_as_is(tmp_path: Path) -> None:
    assert Sandbox().argv(["bash", "-c", "true"], tmp_path) == ["bash", "-c", "true"]


def test_hidden_paths_inside_the_workspace_are_hidden_after_its_bind(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ws = home / "workspace"
    secret_dir = ws / "storage"
    for d in (ws, secret_dir):
        d.mkdir(parents=True)
    config = home / "config.json"
    config.write_text("{}")
    box = Sandbox(bwrap="/usr/bin/bwrap", network=False, hidden=(home, secret_dir, config))
    argv = box.argv(["bash", "-c", "true"], ws)
    joined = " ".join(argv)
    assert "--unshare-net" in argv
    assert "--die-with-parent" in argv
    assert "--unshare-pid" in argv
    assert joined.index(f"--tmpfs {home} ") < joined.index(f"--bind {ws} {ws}")
    assert joined.index(f"--bind {ws} {ws}") < joined.index(f"--tmpfs {secret_dir}")
    assert f"--ro-bind /dev/null {config}" in joined
    assert argv[-4:] == ["--", "bash", "-c", "true"]
    assert "--info-fd" not in argv
    reported = box.argv(["bash", "-c", "true"], ws, info_fd=7)
    assert reported[1:3] == ["--info-fd", "7"]  # where bwrap says which process the sandbox is


def test_sandbox_bwrap_without_bwrap_refuses_to_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    loaded = make_config(tmp_path, "http://127.0.0.1:9", tools={"bash": {"sandbox": "bwrap"}})
    with pytest.raises(StartupError, match="bubblewrap"):
        resolve_sandbox(loaded)
    auto = make_config(tmp_path, "http://127.0.0.1:9")
    assert resolve_sandbox(auto).bwrap is None  # auto: unsandboxed, with a warning
