"""How the shell tool's child runs: under bubblewrap, or plain with limits.

`bwrap` (Debian package `bubblewrap`) gives the command a fresh PID namespace
(it sees only its own processes, so not the gateway's /proc/<pid>/environ),
`--die-with-parent` (every process of the command is killed when the command
ends, when the tool kills it on timeout, or when the gateway dies), the whole
file system read-only except the workspace and a private /tmp, and the
daemon's own files (`Sandbox.hidden`: PICOBOT_HOME with config, database,
credentials, media) replaced by empty mounts. Network stays on unless
`network` is off (`--unshare-net`). Without bwrap (`sandbox: "off"`), the
child still gets a parent-death signal and the resource limits; the gateway
being non-dumpable (gateway.ops.hardening) keeps its environ from a same-uid child.

A bwrap killed in its first moment leaves a sandbox that has not armed that
signal yet, so the tool also kills the sandbox's first process, which bwrap
reports on `--info-fd` (agent/tools/shell.py).

Nothing here runs a process: it builds the argv and the pre-exec hook.
"""

from __future__ import annotations

import ctypes
import resource
import shutil
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

__all__ = ["Sandbox", "SandboxMode", "bwrap_path", "child_setup"]

_PR_SET_PDEATHSIG = 1
try:  # loaded once here: the pre-exec hook must not look anything up in the child
    _prctl: Callable[..., int] | None = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # not Linux
    _prctl = None


class SandboxMode(StrEnum):
    AUTO = "auto"  # bwrap when installed, else off (with a start-up warning)
    BWRAP = "bwrap"  # bwrap or refuse to start
    OFF = "off"


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


@dataclass(frozen=True, slots=True)
class Sandbox:
    """The resolved sandbox for the shell tool (None bwrap: run without one)."""

    bwrap: str | None = None
    network: bool = True
    hidden: tuple[Path, ...] = ()  # never visible inside the sandbox
    max_processes: int | None = None  # RLIMIT_NPROC (per user id, as the kernel counts)

    def argv(
        self, command: Sequence[str], workspace: Path, info_fd: int | None = None
    ) -> list[str]:
        """`info_fd`: where bwrap reports the sandbox's first process (`--info-fd`)."""
        if self.bwrap is None:
            return list(command)
        ws = workspace.resolve()
        args = [
            self.bwrap,
            *([] if info_fd is None else ["--info-fd", str(info_fd)]),
            "--die-with-parent",
            "--new-session",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            *([] if self.network else ["--unshare-net"]),
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--tmpfs",
            "/tmp",
        ]
        inside = [p for p in self.hidden if _within(p, ws)]
        for path in (p for p in self.hidden if not _within(p, ws)):
            args += _hide(path)
        args += ["--bind", str(ws), str(ws)]
        for path in inside:
            args += _hide(path)
        return [*args, "--chdir", str(ws), "--", *command]


def _within(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


def _hide(path: Path) -> list[str]:
    if path.is_dir():
        return ["--tmpfs", str(path)]
    if path.exists():
        return ["--ro-bind", "/dev/null", str(path)]
    return []


def child_setup(max_processes: int | None) -> Callable[[], None]:
    """The pre-exec hook: a parent-death signal (SIGKILL) and the process limit.
    Runs in the forked child before exec: only async-signal-safe-ish calls."""

    def setup() -> None:
        if _prctl is not None:
            _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if max_processes is not None:
            resource.setrlimit(resource.RLIMIT_NPROC, (max_processes, max_processes))

    return setup
