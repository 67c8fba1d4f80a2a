"""The bash tool: runs in the workspace, reports exit codes, caps output, scrubs
secrets from the environment, and kills the whole process group on timeout or cancel."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from agent.messages import ToolCall
from agent.tools.base import ToolContext, ToolRegistry
from agent.tools.sandbox import Sandbox, bwrap_path
from agent.tools.shell import ShellArgs, ShellTool, scrubbed_environment
from tests.support import processes_with, wait_until

MakeCtx = Callable[..., ToolContext]
needs_bwrap = pytest.mark.skipif(bwrap_path() is None, reason="bubblewrap is not installed")


async def bash(ctx: ToolContext, command: str, timeout_secs: float | None = None) -> str:
    return await ShellTool().run(ShellArgs(command=command, timeout_secs=timeout_secs), ctx)


async def assert_process_ends(pid: int) -> None:
    """Await the process's exit through a pidfd (an event, not a poll)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return  # already gone and reaped
    loop = asyncio.get_running_loop()
    exited: asyncio.Future[None] = loop.create_future()
    loop.add_reader(fd, exited.set_result, None)
    try:
        await asyncio.wait_for(exited, timeout=5)
    finally:
        loop.remove_reader(fd)
        os.close(fd)


def test_tool_is_named_bash_on_unix() -> None:
    assert ShellTool.name == "bash"


async def test_runs_in_the_workspace_and_reports_exit_code(
    workspace: Path, ctx: ToolContext
) -> None:
    out = await bash(ctx, "pwd; echo oops >&2; exit 3")
    assert out == f"exit_code: 3\n{workspace.resolve()}\noops\n"


async def test_success_and_empty_output(ctx: ToolContext) -> None:
    assert await bash(ctx, "true") == "exit_code: 0\n(no output)"
    assert await bash(ctx, "printf 'a b'") == "exit_code: 0\na b"


async def test_timeout_kills_the_whole_process_group(workspace: Path, ctx: ToolContext) -> None:
    out = await bash(ctx, "sleep 30 & echo $! > pid; wait", timeout_secs=0.5)
    assert out.startswith("[timed out after 0.5s; the command and its process group were killed]")
    await assert_process_ends(int((workspace / "pid").read_text()))


async def test_timeout_is_capped_by_the_operator_limit(workspace: Path, make_ctx: MakeCtx) -> None:
    out = await bash(make_ctx(exec_timeout_secs=0.5), "sleep 30 & echo $! > pid; wait", 100)
    assert out.startswith("[timed out after 0.5s")
    await assert_process_ends(int((workspace / "pid").read_text()))


async def test_cancellation_kills_the_process_group(workspace: Path, ctx: ToolContext) -> None:
    # The registry's own timeout cancels the running tool; the group must die with it.
    registry = ToolRegistry([ShellTool()], timeout_secs=1.0)
    call = ToolCall("1", "bash", '{"command": "sleep 30 & echo $! > pid; wait"}')
    result = await registry.execute(call, ctx)
    assert (result.ok, result.content) == (False, "Error: tool timed out after 1s")
    await assert_process_ends(int((workspace / "pid").read_text()))


@asynccontextmanager
async def _leaves_no_process(marker: str, call: asyncio.Task[str]) -> AsyncIterator[None]:
    """After the body, nothing whose command line holds `marker` outlives
    `call`: each such process is awaited to its end (it dies a moment after
    its SIGKILL); whatever happened, what is left is killed and `call` ended."""
    try:
        yield
        for pid in processes_with(marker):
            await assert_process_ends(pid)
    finally:
        for pid in processes_with(marker):
            os.kill(pid, signal.SIGKILL)
        await asyncio.wait([call], timeout=10)


@pytest.mark.parametrize(
    "sandboxed",
    [False, pytest.param(True, marks=needs_bwrap)],
)
async def test_a_call_cancelled_while_its_process_starts_ends_at_once_and_kills_it(
    make_ctx: MakeCtx, monkeypatch: pytest.MonkeyPatch, sandboxed: bool
) -> None:
    """/stop lands while the process starts (its output pipe not connected
    yet). asyncio's own clean-up of a start cut short kills the direct child
    alone and then waits for the pipe to close, which the command's other
    processes held open, so the stopped call waited for the command (30 s):
    plain, bash's forked `sleep`; under bwrap, killed in its first moment, a
    sandbox that had not armed --die-with-parent yet."""
    ctx = make_ctx(shell_sandbox=Sandbox(bwrap=bwrap_path()) if sandboxed else Sandbox())
    loop = asyncio.get_running_loop()
    connect = loop.connect_read_pipe
    marker = f"30.{4244 if sandboxed else 4242}"  # in the command line of each process

    async def connect_cancelled(*args: Any, **kwargs: Any) -> Any:
        # the second process: plain, bash's forked sleep; under bwrap, the sandbox
        # just cloned, in the moment before bwrap lets it go
        await wait_until(lambda: len(processes_with(marker)) >= 2)
        call.cancel()
        return await connect(*args, **kwargs)

    monkeypatch.setattr(loop, "connect_read_pipe", connect_cancelled)
    # not bash's last command: bash forks it rather than becoming it
    call = asyncio.create_task(bash(ctx, f"sleep {marker}; true"))
    async with _leaves_no_process(marker, call):
        done, _ = await asyncio.wait([call], timeout=10)
        assert call in done
        assert call.cancelled()


@needs_bwrap
async def test_under_bwrap_a_kill_ends_the_sandbox_through_its_first_process(
    make_ctx: MakeCtx, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sandbox arms --die-with-parent itself, a moment after bwrap starts
    it: a bwrap killed sooner left it running. So the tool also kills the
    sandbox's first process (bwrap reports it on --info-fd), which ends its
    whole PID namespace; shown here with the kill of bwrap's group left out,
    and a reap that would otherwise wait 60 s for the sandbox to end."""
    monkeypatch.setattr("agent.tools.shell._kill_group", lambda transport: None)
    monkeypatch.setattr("agent.tools.shell._REAP_SECS", 60.0)
    marker = "sleep\x0030.4343"
    ctx = make_ctx(shell_sandbox=Sandbox(bwrap=bwrap_path()))
    call = asyncio.create_task(bash(ctx, "sleep 30.4343; true", 0.5))
    async with _leaves_no_process(marker, call):
        done, _ = await asyncio.wait([call], timeout=10)
        assert call in done
        assert call.result().startswith("[timed out after 0.5s")


async def test_a_process_that_left_the_group_holding_the_pipe_does_not_leak_it(
    workspace: Path, ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`setsid` escapes the group kill and keeps the output pipe open: the call
    still returns after the reap, and the daemon's end of the pipe is closed."""
    monkeypatch.setattr("agent.tools.shell._REAP_SECS", 0.2)
    before = len(os.listdir("/proc/self/fd"))
    try:
        out = await bash(ctx, "setsid sleep 30 & echo $! > pid; wait", timeout_secs=0.3)
        assert out.startswith("[timed out after 0.3s")
        await asyncio.sleep(0)  # one loop pass: a transport closes its pipe in call_soon
        assert len(os.listdir("/proc/self/fd")) == before
    finally:
        os.kill(int((workspace / "pid").read_text()), signal.SIGKILL)


async def test_secrets_are_not_in_the_child_environment(
    ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-1")
    monkeypatch.setenv("FOO_TOKEN", "tok-2")
    monkeypatch.setenv("my_secret_thing", "s-3")
    monkeypatch.setenv("DB_PASSWORD", "pw-4")
    monkeypatch.setenv("PICOBOT_TELEGRAM", "p-5")
    monkeypatch.setenv("ORDINARY_VAR", "visible-value")
    out = await bash(ctx, "env")
    assert "ORDINARY_VAR=visible-value" in out
    for leaked in ["sk-test-1", "tok-2", "s-3", "pw-4", "p-5"]:
        assert leaked not in out


def test_scrubbed_environment_rules() -> None:
    env = {
        "PATH": "/bin",
        "HOME": "/h",
        "ANTHROPIC_API_KEY": "x",
        "github_token": "x",
        "AWS_SECRET_ACCESS_KEY": "x",
        "MYSQL_PASSWORD": "x",
        "PICOBOT_HOME": "x",
        "LANG": "C",
    }
    assert scrubbed_environment(env) == {"PATH": "/bin", "HOME": "/h", "LANG": "C"}


async def test_output_is_capped_keeping_head_and_tail(make_ctx: MakeCtx) -> None:
    ctx = make_ctx(exec_output_max_chars=1000)
    out = await bash(ctx, "echo START; head -c 200000 /dev/zero | tr '\\0' a; echo; echo END")
    body = out.removeprefix("exit_code: 0\n")
    assert body.startswith("START\naaa")
    assert body.rstrip().endswith("aaa\nEND")
    assert "[... output truncated to 1000 characters;" in body
    assert len(body) < 1200


async def test_short_output_with_a_large_cap_is_untouched(make_ctx: MakeCtx) -> None:
    out = await bash(make_ctx(exec_output_max_chars=10), "printf 0123456789")
    assert out == "exit_code: 0\n0123456789"


async def test_workspace_is_created_if_missing(tmp_path: Path, make_ctx: MakeCtx) -> None:
    ws = tmp_path / "fresh" / "ws"
    ctx = make_ctx(workspace=ws)
    assert await bash(ctx, "pwd") == f"exit_code: 0\n{ws.resolve()}\n"


async def test_concurrent_calls_do_not_block_each_other(workspace: Path, ctx: ToolContext) -> None:
    # Each command opens a FIFO the other one opens from the other end: both
    # finish only if they run at the same time (no serialising, no blocked loop).
    os.mkfifo(workspace / "p1")
    os.mkfifo(workspace / "p2")
    a = bash(ctx, "echo from-a > p1; cat p2", 10)
    b = bash(ctx, "cat p1; echo from-b > p2", 10)
    out_a, out_b = await asyncio.gather(a, b)
    assert (out_a, out_b) == ("exit_code: 0\nfrom-b\n", "exit_code: 0\nfrom-a\n")
