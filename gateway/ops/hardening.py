"""Process hardening at start-up: the shell tool's sandbox, a non-dumpable gateway.

`resolve_sandbox` turns `tools.bash` into the `Sandbox` the shell tool uses:
`auto` is bwrap when it is installed and no sandbox (with a warning) when it
is not; `bwrap` without it refuses to start. `make_non_dumpable` sets
PR_SET_DUMPABLE to 0, so a process of the same (non-root) user, such as a
tool child, cannot read the gateway's /proc/<pid>/environ or ptrace it.
"""

from __future__ import annotations

import ctypes
import sys

import structlog

from agent.tools.sandbox import Sandbox, SandboxMode, bwrap_path
from gateway.config.loading import LoadedConfig
from gateway.lifecycle import StartupError

__all__ = ["BWRAP_INSTALL_HINT", "make_non_dumpable", "resolve_sandbox"]

log = structlog.get_logger(__name__)

BWRAP_INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install "
    'bubblewrap) so the bash tool runs sandboxed, or set tools.bash.sandbox to "off"'
)
_PR_SET_DUMPABLE = 4


def resolve_sandbox(loaded: LoadedConfig) -> Sandbox:
    bash = loaded.config.tools.bash
    mode = SandboxMode(bash.sandbox)
    found = bwrap_path() if mode is not SandboxMode.OFF and sys.platform == "linux" else None
    if mode is SandboxMode.BWRAP and found is None:
        raise StartupError(
            f'tools.bash.sandbox is "bwrap" but bwrap is not installed: {BWRAP_INSTALL_HINT}'
        )
    if mode is SandboxMode.AUTO and found is None:
        log.warning("bash_tool_unsandboxed", hint=BWRAP_INSTALL_HINT)
    hidden = {loaded.home, loaded.media_dir}
    if loaded.sqlite_path is not None:  # a PostgreSQL server has no folder here to hide
        hidden.add(loaded.sqlite_path.parent)
    if loaded.path is not None:
        hidden.add(loaded.path)
    return Sandbox(
        bwrap=found,
        network=bash.network,
        hidden=tuple(sorted(p.expanduser().resolve() for p in hidden)),
        max_processes=bash.max_processes,
    )


def make_non_dumpable() -> bool:
    """True when the gateway is now non-dumpable (Linux only)."""
    if sys.platform != "linux":
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False
