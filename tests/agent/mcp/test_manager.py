"""McpManager against real MCP servers (FastMCP, tests/mcp_servers): stdio children
and a streamable-HTTP server process that the tests kill and restart."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import types
from structlog.testing import capture_logs

from agent.mcp.config import McpServerConfig
from agent.mcp.errors import McpUnavailable
from agent.mcp.manager import CallOutcome, McpManager
from agent.mcp.manager import tool_spec as mcp_spec
from agent.mcp.server import TASK_ONLY, Backoff, ServerState
from agent.tools.base import ToolContext, ToolError, ToolOutput, ToolSettings
from tests.mcp_servers.harness import HttpMcpServer, free_port, stdio_server
from tests.support import wait_until

FAST = Backoff(0.05, 0.5)
TOKEN = "test-mcp-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 24  # what fs_server's `picture` returns


@asynccontextmanager
async def running(servers: dict[str, dict[str, Any]], **keys: Any) -> AsyncIterator[McpManager]:
    configs = {k: McpServerConfig.model_validate(v) for k, v in servers.items()}
    manager = McpManager(configs, backoff=FAST, **keys)
    async with asyncio.TaskGroup() as tg:
        await manager.start(tg)
        try:
            yield manager
        finally:
            await manager.stop()


async def until(manager: McpManager, condition: Callable[[], bool], timeout: float = 30) -> None:
    async with asyncio.timeout(timeout):
        await manager.wait_until(condition)


def state(manager: McpManager, key: str) -> ServerState:
    return manager.servers[key].state


def offered(manager: McpManager) -> list[str]:
    return [s.name for s in manager.specs()]


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext("s", "websocket", "c", "u", ToolSettings(workspace=tmp_path))


def _pid(path: Path) -> int:
    return int(path.read_text())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_a_stdio_server_is_offered_and_called(ctx: ToolContext) -> None:
    calls: list[tuple[str, CallOutcome]] = []
    async with running(
        {"fs": stdio_server()}, on_call=lambda s, o, _secs: calls.append((s, o))
    ) as mcp:
        assert mcp.unavailable() == ["fs"]  # start() did not wait for it
        await until(mcp, lambda: state(mcp, "fs") is ServerState.UP)
        assert mcp.unavailable() == []
        specs = {s.name: s for s in mcp.specs()}
        assert {"mcp_fs_echo", "mcp_fs_crash", "mcp_fs_grow"} <= set(specs)
        echo = specs["mcp_fs_echo"]
        assert "Return the text unchanged" in echo.description
        assert echo.parameters["properties"]["text"]["type"] == "string"
        assert await mcp.call("mcp_fs_echo", {"text": "ping"}, ctx) == "ping"
        with pytest.raises(ToolError, match="the disk is on fire"):  # isError → error result
            await mcp.call("mcp_fs_fail", {}, ctx)
        picture = await mcp.call("mcp_fs_picture", {}, ctx)
        assert picture == "[image image/png, 32 bytes: not shown to the model]"
    assert calls == [("fs", CallOutcome.OK), ("fs", CallOutcome.ERROR), ("fs", CallOutcome.OK)]
    assert state(mcp, "fs") is ServerState.STOPPED


async def test_a_stdio_server_that_crashes_mid_call_is_restarted(
    ctx: ToolContext, tmp_path: Path
) -> None:
    pid_file = tmp_path / "fs.pid"
    async with running({"fs": stdio_server("--pid-file", str(pid_file))}) as mcp:
        await until(mcp, lambda: state(mcp, "fs") is ServerState.UP)
        first = _pid(pid_file)
        with pytest.raises(McpUnavailable, match="dropped the connection during this call"):
            await mcp.call("mcp_fs_crash", {}, ctx)
        assert "mcp_fs_echo" not in offered(mcp)  # withdrawn at once
        with pytest.raises(McpUnavailable, match="`fs` is unavailable"):
            await mcp.call("mcp_fs_echo", {"text": "too soon"}, ctx)
        await until(mcp, lambda: state(mcp, "fs") is ServerState.UP)
        assert _pid(pid_file) != first
        assert await mcp.call("mcp_fs_echo", {"text": "again"}, ctx) == "again"


async def test_a_stdio_server_that_exits_while_idle_is_restarted(
    ctx: ToolContext, tmp_path: Path
) -> None:
    pid_file = tmp_path / "fs.pid"
    async with running({"fs": stdio_server("--pid-file", str(pid_file))}) as mcp:
        await until(mcp, lambda: state(mcp, "fs") is ServerState.UP)
        first = _pid(pid_file)
        assert await mcp.call("mcp_fs_quit", {}, ctx) == "bye"
        await until(mcp, lambda: state(mcp, "fs") is not ServerState.UP)  # noticed unasked
        await until(mcp, lambda: state(mcp, "fs") is ServerState.UP)
        assert _pid(pid_file) != first
        assert await mcp.call("mcp_fs_echo", {"text": "new"}, ctx) == "new"


async def test_tools_list_changed_offers_the_new_tool(ctx: ToolContext) -> None:
    async with running({"fs": stdio_server()}) as mcp:
        await until(mcp, lambda: state(mcp, "fs") is ServerState.UP)
        assert "mcp_fs_shout" not in offered(mcp)
        assert await mcp.call("mcp_fs_grow", {}, ctx) == "added shout"
        await until(mcp, lambda: "mcp_fs_shout" in offered(mcp))
        assert await mcp.call("mcp_fs_shout", {"text": "hi"}, ctx) == "HI"


async def test_an_http_server_killed_and_restarted_on_its_port_comes_back(
    ctx: ToolContext,
) -> None:
    async with HttpMcpServer(TOKEN) as http, running({"web": http.entry(headers=AUTH)}) as mcp:
        await until(mcp, lambda: state(mcp, "web") is ServerState.UP)
        assert await mcp.call("mcp_web_echo", {"text": "hi"}, ctx) == "hi"
        await http.kill()
        # noticed without a call: the event stream broke
        await until(mcp, lambda: state(mcp, "web") is not ServerState.UP)
        assert offered(mcp) == []
        with pytest.raises(McpUnavailable):
            await mcp.call("mcp_web_echo", {"text": "hi"}, ctx)
        await http.start()  # same port
        await until(mcp, lambda: state(mcp, "web") is ServerState.UP)
        assert await mcp.call("mcp_web_echo", {"text": "back"}, ctx) == "back"


async def test_an_http_server_that_drops_mid_call_ends_the_call_at_once(
    ctx: ToolContext,
) -> None:
    async with HttpMcpServer(TOKEN) as http:
        config = http.entry(headers=AUTH, timeout_secs=120)
        async with running({"web": config}) as mcp:
            await until(mcp, lambda: state(mcp, "web") is ServerState.UP)
            async with asyncio.timeout(20):  # far below timeout_secs: no waiting it out
                with pytest.raises(McpUnavailable, match="dropped the connection"):
                    await mcp.call("mcp_web_crash", {}, ctx)


async def test_a_server_down_at_start_is_retried_until_it_comes_up(ctx: ToolContext) -> None:
    http = HttpMcpServer(TOKEN, port=free_port())
    with capture_logs() as logs:
        async with running({"web": http.entry(headers=AUTH)}) as mcp:
            await until(mcp, lambda: state(mcp, "web") is ServerState.DOWN)
            status = mcp.statuses()[0]
            assert status.error is not None
            assert "cannot reach the server" in status.error
            await http.start()
            try:
                await until(mcp, lambda: state(mcp, "web") is ServerState.UP)
                assert await mcp.call("mcp_web_echo", {"text": "hi"}, ctx) == "hi"
            finally:
                await http.kill()
    assert any(e["event"] == "mcp_connect_failed" for e in logs)


async def test_a_wrong_token_leaves_the_server_down_with_the_status() -> None:
    async with HttpMcpServer(TOKEN) as http:
        entry = http.entry(headers={"Authorization": "Bearer wrong-token-000000"})
        async with running({"web": entry}) as mcp:
            await until(mcp, lambda: state(mcp, "web") is ServerState.DOWN)
            assert mcp.statuses()[0].error == "the server answered HTTP 401"


async def test_a_missing_command_is_retried_with_growing_waits() -> None:
    with capture_logs() as logs:
        async with running({"fs": {"type": "stdio", "command": "/nonexistent/mcp-server"}}) as mcp:

            def failures() -> list[dict[str, Any]]:
                return [e for e in logs if e["event"] == "mcp_connect_failed"]

            await until(mcp, lambda: len(failures()) >= 3)
    assert [e["retry_in_secs"] for e in failures()[:3]] == [0.05, 0.1, 0.2]
    assert "cannot start the server" in failures()[0]["error"]
    assert "not found" in failures()[0]["error"]


async def test_a_slow_server_is_connecting_until_it_answers(
    ctx: ToolContext, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    async with running({"slow": stdio_server("--gate", str(gate))}) as mcp:
        assert mcp.unavailable() == ["slow"]
        assert state(mcp, "slow") is ServerState.CONNECTING
        with pytest.raises(McpUnavailable, match="`slow` is unavailable"):
            await mcp.call("mcp_slow_echo", {"text": "hi"}, ctx)
        await asyncio.to_thread(gate.write_text, "go\n")  # blocks until the server reads
        await until(mcp, lambda: state(mcp, "slow") is ServerState.UP)
        assert await mcp.call("mcp_slow_echo", {"text": "hi"}, ctx) == "hi"


async def test_name_collisions_skip_the_newcomer_and_disabled_names_are_left_out(
    ctx: ToolContext,
) -> None:
    servers = {"x y": stdio_server(), "x_y": stdio_server()}
    with capture_logs() as logs:
        async with running(servers, reserved=["mcp_x_y_env"], disabled=["mcp_x_y_fail"]) as mcp:
            await until(mcp, lambda: mcp.unavailable() == [])
            names = offered(mcp)
            assert names.count("mcp_x_y_echo") == 1
            assert "mcp_x_y_env" not in names  # a built-in's name
            assert "mcp_x_y_fail" not in names  # tools.disabled
            taken = [e for e in logs if e["event"] == "mcp_tool_name_taken"]
            newcomer = {e["server"] for e in taken if e["tool"] == "echo"}
            assert len(newcomer) == 1
            (second,) = newcomer
            first = "x y" if second == "x_y" else "x_y"
            # the first owner goes away: its names pass to the other server
            with pytest.raises(McpUnavailable):
                await mcp.call("mcp_x_y_crash", {}, ctx)
            await until(mcp, lambda: state(mcp, first) is not ServerState.UP)
            assert "mcp_x_y_echo" in offered(mcp)
            assert await mcp.call("mcp_x_y_echo", {"text": "from the other"}, ctx) == (
                "from the other"
            )
    assert {e["taken_by"] for e in taken if e["tool"] == "env"} == {"a built-in tool"}


async def test_the_child_gets_its_env_and_none_of_the_gateways(
    ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PICOBOT_TEST_PROVIDER_KEY", "must-not-leak")
    async with running({"fs": stdio_server(env={"GIVEN": "yes"})}) as mcp:
        await until(mcp, lambda: state(mcp, "fs") is ServerState.UP)
        leaked = await mcp.call("mcp_fs_env", {"name": "PICOBOT_TEST_PROVIDER_KEY"}, ctx)
        assert leaked == "(unset)"
        assert await mcp.call("mcp_fs_env", {"name": "GIVEN"}, ctx) == "yes"
        assert await mcp.call("mcp_fs_env", {"name": "PATH"}, ctx) != "(unset)"


async def test_stop_leaves_no_stdio_child(tmp_path: Path) -> None:
    pid_file = tmp_path / "fs.pid"
    async with running({"fs": stdio_server("--pid-file", str(pid_file))}) as mcp:
        await until(mcp, lambda: state(mcp, "fs") is ServerState.UP)
        pid = _pid(pid_file)
        assert _alive(pid)
    assert not _alive(pid)


async def test_an_inactive_server_is_never_started() -> None:
    async with running({"off": stdio_server(isActive=False)}) as mcp:
        assert mcp.servers == {}
        assert mcp.unavailable() == []


async def test_task_only_tools_are_left_out_and_logged_once_per_server(ctx: ToolContext) -> None:
    with capture_logs() as logs:
        async with running({"fs": stdio_server()}) as mcp:
            await until(mcp, lambda: state(mcp, "fs") is ServerState.UP)
            assert "mcp_fs_echo" in offered(mcp)
            assert "mcp_fs_batch_job" not in offered(mcp)
            assert mcp.left_out() == [("mcp_fs_batch_job", TASK_ONLY)]
            assert mcp.statuses()[0].tools == len(offered(mcp))
            assert await mcp.call("mcp_fs_grow", {}, ctx) == "added shout"  # listed again
            await until(mcp, lambda: "mcp_fs_shout" in offered(mcp))
            with pytest.raises(ToolError, match="no longer offers"):
                await mcp.call("mcp_fs_batch_job", {}, ctx)
    left_out = [e for e in logs if e["event"] == "mcp_tools_left_out"]
    assert len(left_out) == 1
    assert left_out[0]["server"] == "fs"
    assert left_out[0]["tools"] == ["batch_job"]
    assert "taskSupport" in left_out[0]["reason"]


async def _lines(path: Path, count: int, timeout: float = 20) -> list[str]:
    """The first `count` lines the server wrote to `path` (another process:
    nothing to await but the file)."""

    def written() -> list[str]:
        return path.read_text().splitlines() if path.exists() else []

    await wait_until(lambda: len(written()) >= count, timeout)
    return written()


async def test_a_stopped_call_is_cancelled_at_the_server_by_its_request_id(
    ctx: ToolContext, tmp_path: Path
) -> None:
    record = tmp_path / "hang.txt"
    async with running({"fs": stdio_server()}) as mcp:
        await until(mcp, lambda: state(mcp, "fs") is ServerState.UP)
        assert await mcp.call("mcp_fs_echo", {"text": "first"}, ctx) == "first"  # ids move on
        call = asyncio.create_task(mcp.call("mcp_fs_hang", {"path": str(record)}, ctx))
        [started] = await _lines(record, 1)
        call.cancel()  # what /stop does to the turn's tool calls
        with pytest.raises(asyncio.CancelledError):
            await call
        started_line, cancelled_line = await _lines(record, 2)  # the server is still running
        request_id = started.split()[1]
        assert started_line == f"started {request_id}"
        assert cancelled_line == f"cancelled {request_id}"
        assert await mcp.call("mcp_fs_echo", {"text": "still up"}, ctx) == "still up"


async def test_an_image_result_is_a_file_for_a_model_that_reads_images(
    ctx: ToolContext, tmp_path: Path
) -> None:
    media = tmp_path / "media"
    seeing = dataclasses.replace(ctx, accepts_images=True)
    async with running({"fs": stdio_server()}, media_dir=media) as mcp:
        await until(mcp, lambda: state(mcp, "fs") is ServerState.UP)
        shown = await mcp.call("mcp_fs_picture", {}, seeing)
        blind = await mcp.call("mcp_fs_picture", {}, ctx)
    assert isinstance(shown, ToolOutput)
    assert shown.text == "[image image/png, 32 bytes: attached]"
    [path] = shown.media
    assert Path(path).parent == media / "mcp"
    assert Path(path).suffix == ".png"
    assert Path(path).read_bytes() == PNG
    assert blind == "[image image/png, 32 bytes: not shown to the model]"


async def test_without_a_media_dir_an_image_stays_a_placeholder(ctx: ToolContext) -> None:
    seeing = dataclasses.replace(ctx, accepts_images=True)
    async with running({"fs": stdio_server()}) as mcp:
        await until(mcp, lambda: state(mcp, "fs") is ServerState.UP)
        shown = await mcp.call("mcp_fs_picture", {}, seeing)
    assert shown == "[image image/png, 32 bytes: not shown to the model]"


def test_input_schemas_pass_as_sent_less_the_dialect_tag() -> None:
    schema: dict[str, Any] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "searchArguments",
        "type": "object",
        "properties": {
            "q": {"title": "Q", "type": "string", "minLength": 1},
            "where": {"$ref": "#/$defs/Place"},
        },
        "required": ["q"],
        "additionalProperties": False,
        "$defs": {"Place": {"type": "object", "properties": {"city": {"type": "string"}}}},
    }
    configs = {"web": McpServerConfig.model_validate({"type": "http", "url": "http://x.invalid"})}
    manager = McpManager(configs)
    server = manager.servers["web"]
    tool = types.Tool(name="search", inputSchema=schema)
    spec = mcp_spec("mcp_web_search", server, tool)
    assert spec.parameters == {k: v for k, v in schema.items() if k != "$schema"}
    bare = mcp_spec("mcp_web_now", server, types.Tool(name="now", inputSchema={}))
    assert bare.parameters == {"type": "object", "properties": {}}
