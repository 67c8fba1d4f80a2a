"""`picobot mcp list|tools|call` against a real stdio MCP server (FastMCP)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway.cli.mcp import run_mcp_command
from gateway.cli.program import build_parser
from gateway.config.loading import LoadedConfig, parse_config
from gateway.ops.logging import clear_secrets
from tests.mcp_servers.harness import free_port, stdio_server


@pytest.fixture(autouse=True)
def _forget_secrets() -> Iterator[None]:
    yield
    clear_secrets()


def _loaded(tmp_path: Path, **servers: dict[str, Any]) -> LoadedConfig:
    config, missing = parse_config({"mcpServers": servers}, {})
    return LoadedConfig(config, None, tmp_path, missing)


async def _run(loaded: LoadedConfig, *argv: str) -> tuple[int, str]:
    args = build_parser().parse_args(["mcp", *argv])
    out = io.StringIO()
    code = await run_mcp_command(args, loaded, out)
    return code, out.getvalue()


async def test_list_shows_each_server_and_fails_when_one_is_down(tmp_path: Path) -> None:
    loaded = _loaded(
        tmp_path,
        fs=stdio_server(),
        off=stdio_server(isActive=False),
        web={"type": "http", "url": f"http://127.0.0.1:{free_port()}/mcp"},
    )
    code, out = await _run(loaded, "list", "--json")
    rows = json.loads(out)
    assert code == 1  # web is down
    assert rows["fs"]["state"] == "up"
    assert rows["fs"]["tools"] >= 3
    assert rows["off"] == {"name": "off", "state": "inactive"}
    assert rows["web"]["state"] == "down"
    assert "cannot reach the server" in rows["web"]["error"]


async def test_tools_lists_the_names_the_model_gets(tmp_path: Path) -> None:
    loaded = _loaded(tmp_path, fs=stdio_server(disabled_tools=["crash"]))
    code, out = await _run(loaded, "tools", "fs")
    assert code == 0
    names = [line.split()[0] for line in out.splitlines()]
    assert "mcp_fs_echo" in names
    assert "mcp_fs_crash" not in names
    code, _ = await _run(loaded, "tools", "nope")
    assert code == 2


async def test_tools_shows_task_only_tools_as_not_offered(tmp_path: Path) -> None:
    loaded = _loaded(tmp_path, fs=stdio_server())
    code, out = await _run(loaded, "tools", "fs")
    assert code == 0
    [line] = [line for line in out.splitlines() if line.startswith("mcp_fs_batch_job ")]
    assert "(not offered: the server runs it only as a task" in line
    code, out = await _run(loaded, "tools", "--json")
    rows = {row["name"]: row for row in json.loads(out)}
    assert rows["mcp_fs_batch_job"]["offered"] is False
    assert "taskSupport" in rows["mcp_fs_batch_job"]["why"]
    assert "parameters" in rows["mcp_fs_echo"]


async def test_call_runs_a_tool_and_reports_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    loaded = _loaded(tmp_path, fs=stdio_server())
    assert await _run(loaded, "call", "mcp_fs_echo", '{"text": "by hand"}') == (0, "by hand\n")
    code, _ = await _run(loaded, "call", "mcp_fs_fail")
    assert code == 1
    assert "the disk is on fire" in capsys.readouterr().err
    assert (await _run(loaded, "call", "mcp_fs_echo", "[1]"))[0] == 2
    assert (await _run(loaded, "call", "mcp_nowhere_echo"))[0] == 2
