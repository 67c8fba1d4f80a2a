"""The shell tool: `bash` on Unix (`shell` on Windows), run in the workspace.

The command runs in its own process group with a scrubbed environment (no
variable whose name looks like a credential, no PICOBOT_* settings), under
bubblewrap when `tools.bash.sandbox` resolved to it (agent/tools/sandbox.py:
its own PID namespace, the daemon's files hidden, only the workspace
writable), and with a parent-death signal and a process limit either way. A
timeout or a cancelled call kills the whole group (under bwrap: the whole PID
namespace), so nothing the command started outlives it. Output (stdout and stderr interleaved) is capped. Nothing here may
block the event loop: the child is an asyncio subprocess.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from pydantic import Field

from agent.tools.base import Tool, ToolArgs, ToolContext, ToolError, ToolSettings
from agent.tools.paths import workspace_root
from agent.tools.sandbox import child_setup

__all__ = ["ShellTool", "scrubbed_environment"]

IS_WINDOWS = sys.platform == "win32"
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
_READ_CHUNK = 65_536
_REAP_SECS = 5.0


def scrubbed_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` minus credential-looking names and the daemon's own PICOBOT_* settings."""
    return {
        name: value
        for name, value in environ.items()
        if not _SECRET_NAME.search(name) and not name.upper().startswith("PICOBOT_")
    }


class _CappedOutput:
    """Keeps the head and the tail of a byte stream, at most ~`max_chars` characters."""

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self._keep = 4 * max_chars  # UTF-8 needs at most 4 bytes per character
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self._keep - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            del self.tail[: max(0, len(self.tail) - self._keep)]

    def text(self) -> str:
        whole = self.head.decode("utf-8", errors="replace") + self.tail.decode(
            "utf-8", errors="replace"
        )
        complete = self.total == len(self.head) + len(self.tail)
        if complete and len(whole) <= self.max_chars:
            return whole
        first = self.max_chars // 2
        last = self.max_chars - first
        lost = (
            f"{len(whole) - self.max_chars} characters"
            if complete
            else f"at least {self.total - len(self.head) - len(self.tail)} bytes"
        )
        return (
            f"{whole[:first]}\n[... output truncated to {self.max_chars} characters; "
            f"{lost} omitted ...]\n{whole[-last:]}"
        )


def _prepare_workspace(settings: ToolSettings) -> Path:
    root = workspace_root(settings)
    root.mkdir(parents=True, exist_ok=True)
    return root


async def _drain(stream: asyncio.StreamReader, sink: _CappedOutput) -> None:
    while chunk := await stream.read(_READ_CHUNK):
        sink.feed(chunk)


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if IS_WINDOWS:
            proc.kill()
        else:
            # start_new_session made the child a group leader: pgid == pid.
            os.killpg(proc.pid, signal.SIGKILL)


class ShellArgs(ToolArgs):
    command: str
    timeout_secs: float | None = Field(
        default=None, gt=0, description="capped by the operator's limit"
    )


class ShellTool(Tool[ShellArgs]):
    name: ClassVar[str] = "shell" if IS_WINDOWS else "bash"
    description: ClassVar[str] = (
        "Run a command"
        + (" (PowerShell)" if IS_WINDOWS else " with `bash -c`")
        + " in the workspace; returns the exit code and output (capped). On timeout all "
        "it started is killed; background processes must redirect output."
    )
    Args: ClassVar[type[ToolArgs]] = ShellArgs

    async def run(self, args: ShellArgs, ctx: ToolContext) -> str:
        settings = ctx.settings
        limit = settings.exec_timeout_secs
        timeout = min(args.timeout_secs, limit) if args.timeout_secs else limit
        sandbox = settings.shell_sandbox
        cwd = await asyncio.to_thread(_prepare_workspace, settings)
        argv = (
            ["powershell", "-NoProfile", "-NonInteractive", "-Command", args.command]
            if IS_WINDOWS
            else await asyncio.to_thread(sandbox.argv, ["bash", "-c", args.command], cwd)
        )
        loop = asyncio.get_running_loop()
        try:
            # subprocess_exec rather than create_subprocess_exec: it hands us the
            # transport, which `finally` closes even when the pipe never reaches EOF
            transport, protocol = await loop.subprocess_exec(
                lambda: asyncio.subprocess.SubprocessStreamProtocol(_READ_CHUNK, loop),
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                cwd=cwd,
                env=scrubbed_environment(os.environ),
                start_new_session=not IS_WINDOWS,
                preexec_fn=None if IS_WINDOWS else child_setup(sandbox.max_processes),
            )
        except OSError as exc:
            raise ToolError(f"cannot start {argv[0]}: {exc.strerror}") from None
        proc = asyncio.subprocess.Process(transport, protocol, loop)
        assert proc.stdout is not None
        output = _CappedOutput(settings.exec_output_max_chars)
        timed_out = False
        try:
            async with asyncio.timeout(timeout):
                await _drain(proc.stdout, output)
                await proc.wait()
        except TimeoutError:
            timed_out = True
        finally:
            try:
                if timed_out or proc.returncode is None:  # timeout or cancellation
                    _kill_group(proc)
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(_REAP_SECS):
                            await proc.wait()
                            await _drain(proc.stdout, output)
            finally:
                # a process that left the group (setsid) may still hold the pipe, and a
                # second cancellation may cut the reap short: never leak the descriptor
                transport.close()
        text = output.text() or "(no output)"
        if timed_out:
            return (
                f"[timed out after {timeout:g}s; the command and its process group were "
                f"killed]\n{text}"
            )
        return f"exit_code: {proc.returncode}\n{text}"
