"""The shell tool: `bash` on Unix (`shell` on Windows), run in the workspace.

The command runs in its own process group with a scrubbed environment (no
variable whose name looks like a credential, no PICOBOT_* settings), under
bubblewrap when `tools.bash.sandbox` resolved to it (agent/tools/sandbox.py:
its own PID namespace, the daemon's files hidden, only the workspace
writable), and with a parent-death signal and a process limit either way. A
timeout or a cancelled call kills the whole group (under bwrap: the whole PID
namespace), so nothing the command started outlives it, also when the call is
cancelled (/stop) while the process is still starting. Output (stdout and
stderr interleaved) is capped. Nothing here may block the event loop: the
child is an asyncio subprocess.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
from collections.abc import Coroutine, Mapping
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field

from agent.tools.base import Tool, ToolArgs, ToolContext, ToolError, ToolSettings
from agent.tools.paths import workspace_root
from agent.tools.sandbox import child_setup

__all__ = ["ShellTool", "scrubbed_environment"]

IS_WINDOWS = sys.platform == "win32"
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
_READ_CHUNK = 65_536
_REAP_SECS = 5.0
_INFO_WAIT_SECS = 2.0  # a kill's wait for bwrap to report the sandbox's process
_CHILD_PID = re.compile(rb'"child-pid":\s*(\d+)')


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


def _kill_group(transport: asyncio.SubprocessTransport) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if IS_WINDOWS:
            transport.kill()
        else:
            # start_new_session made the child a group leader: pgid == pid.
            os.killpg(transport.get_pid(), signal.SIGKILL)


class _SandboxPid:
    """The sandbox's first process, which bwrap reports on `--info-fd` (JSON
    `child-pid`) the moment it has cloned it. Killed, it takes the sandbox's
    whole PID namespace with it, also where `--die-with-parent` would not: a
    bwrap killed before its child armed that signal leaves the child running
    (and holding the command's output pipe open)."""

    def __init__(self) -> None:
        self._read, self.write = os.pipe()  # neither inherited; pass_fds hands on `write`
        os.set_blocking(self._read, False)
        self._data = bytearray()
        self._eof = False

    def started(self) -> None:
        """The child has its copy of the write end; ours is closed."""
        if self.write >= 0:
            os.close(self.write)
            self.write = -1

    def _reported(self) -> int | None:
        while not self._eof:
            try:
                chunk = os.read(self._read, 4096)
            except BlockingIOError:
                break
            self._eof = not chunk
            self._data += chunk
        found = _CHILD_PID.search(self._data)
        return int(found[1]) if found else None

    async def pid(self, wait_secs: float) -> int | None:
        """The reported pid; waits at most `wait_secs` for bwrap to report it
        (None: bwrap ended, or never cloned the sandbox in that time)."""
        pid = self._reported()
        if pid is not None or self._eof:
            return pid
        loop = asyncio.get_running_loop()
        known: asyncio.Future[int | None] = loop.create_future()

        def readable() -> None:
            pid = self._reported()
            if (pid is not None or self._eof) and not known.done():
                known.set_result(pid)

        loop.add_reader(self._read, readable)
        try:
            async with asyncio.timeout(wait_secs):
                return await known
        except TimeoutError:
            return None
        finally:
            loop.remove_reader(self._read)

    def close(self) -> None:
        self.started()
        if self._read >= 0:
            os.close(self._read)
            self._read = -1


async def _kill(transport: asyncio.SubprocessTransport, sandbox: _SandboxPid | None) -> None:
    """SIGKILL to the command's process group; under bwrap first to the
    sandbox's first process (the whole PID namespace), once bwrap has said
    which it is (at most `_INFO_WAIT_SECS`): a bwrap killed before then
    leaves its child waiting for a go-ahead that never comes."""
    try:
        if sandbox is not None:
            pid = await sandbox.pid(_INFO_WAIT_SECS)
            if pid is not None and transport.get_returncode() is None:  # else it may be reused
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
    finally:
        _kill_group(transport)


async def _to_the_end(clean_up: Coroutine[Any, Any, None], name: str) -> None:
    """Run `clean_up` to its end even if this task is cancelled meanwhile; the
    cancellation is raised after it. For the bounded clean-up that must not be
    cut short, or what a command started outlives the call."""
    task = asyncio.create_task(clean_up, name=name)
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            cancelled = True
        except Exception:
            break  # its own failure: raised below
    if cancelled:
        raise asyncio.CancelledError from (None if task.cancelled() else task.exception())
    task.result()


_Started = tuple[asyncio.SubprocessTransport, asyncio.subprocess.SubprocessStreamProtocol]


async def _stop_started(start: asyncio.Task[_Started], sandbox: _SandboxPid | None) -> None:
    """For a call cancelled while its process started. asyncio's own clean-up
    of a start cut short kills the direct child only and then waits until the
    output pipe closes, which the command's other processes (a sandbox, a
    background job) hold open: the stop would wait for the command to end.
    So the start is let finish (a moment: the process exists, its pipe is
    being connected) and what it started is killed, as after a cancelled run."""
    try:
        transport, protocol = await start
    except Exception:
        return  # nothing started (its own clean-up has run)
    proc = asyncio.subprocess.Process(transport, protocol, asyncio.get_running_loop())
    await _kill_and_reap(proc, transport, sandbox, _CappedOutput(0))


async def _kill_and_reap(
    proc: asyncio.subprocess.Process,
    transport: asyncio.SubprocessTransport,
    sandbox: _SandboxPid | None,
    output: _CappedOutput,
) -> None:
    """Kill what the command started (that much even through another
    cancellation), then give it `_REAP_SECS` to exit and its output (read
    into `output`) to end."""
    try:
        await _to_the_end(_kill(transport, sandbox), "bash-kill")
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_REAP_SECS):
                await proc.wait()
                assert proc.stdout is not None
                await _drain(proc.stdout, output)
    finally:
        # a process that left the group (setsid) may still hold the pipe, and a
        # second cancellation may cut the reap short: never leak the descriptor
        transport.close()


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
        reported = _SandboxPid() if sandbox.bwrap is not None and not IS_WINDOWS else None
        try:
            return await self._run(args.command, timeout, settings, cwd, reported)
        finally:
            if reported is not None:
                reported.close()

    async def _run(
        self,
        command: str,
        limit_secs: float,
        settings: ToolSettings,
        cwd: Path,
        reported: _SandboxPid | None,
    ) -> str:
        sandbox = settings.shell_sandbox
        info_fd = reported.write if reported is not None else None
        argv = (
            ["powershell", "-NoProfile", "-NonInteractive", "-Command", command]
            if IS_WINDOWS
            else await asyncio.to_thread(sandbox.argv, ["bash", "-c", command], cwd, info_fd)
        )
        loop = asyncio.get_running_loop()
        # subprocess_exec rather than create_subprocess_exec: it hands us the
        # transport, which `finally` closes even when the pipe never reaches EOF
        start = asyncio.create_task(
            loop.subprocess_exec(
                lambda: asyncio.subprocess.SubprocessStreamProtocol(_READ_CHUNK, loop),
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                cwd=cwd,
                env=scrubbed_environment(os.environ),
                start_new_session=not IS_WINDOWS,
                preexec_fn=None if IS_WINDOWS else child_setup(sandbox.max_processes),
                pass_fds=() if info_fd is None else (info_fd,),
            ),
            name="bash-start",
        )
        if reported is not None:  # the child has its copy of the write end by then
            start.add_done_callback(lambda _: reported.started())
        try:
            transport, protocol = await asyncio.shield(start)
        except asyncio.CancelledError:
            await _to_the_end(_stop_started(start, reported), "bash-stop")
            raise
        except OSError as exc:
            raise ToolError(f"cannot start {argv[0]}: {exc.strerror}") from None
        proc = asyncio.subprocess.Process(transport, protocol, loop)
        assert proc.stdout is not None
        output = _CappedOutput(settings.exec_output_max_chars)
        timed_out = False
        try:
            async with asyncio.timeout(limit_secs):
                await _drain(proc.stdout, output)
                await proc.wait()
        except TimeoutError:
            timed_out = True
        finally:
            if timed_out or proc.returncode is None:  # timeout or cancellation
                await _kill_and_reap(proc, transport, reported, output)
            else:
                transport.close()
        text = output.text() or "(no output)"
        if timed_out:
            return (
                f"[timed out after {limit_secs:g}s; the command and its process group were "
                f"killed]\n{text}"
            )
        return f"exit_code: {proc.returncode}\n{text}"
