"""MCP with a real `picobot gateway` process: a header secret from the
environment reaches the server and never the log; SIGTERM leaves no stdio child."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
import websockets

from tests.fakes.openai_server import FakeOpenAI
from tests.mcp_servers.harness import HttpMcpServer, stdio_server
from tests.support import child_env, newest, process_gone, spawn_gateway

pytestmark = pytest.mark.slow

SECRET = "mcp-secret-Vb7Qw2Xe9Rt4Yu1Io"


def _config(llm: FakeOpenAI, servers: dict[str, Any]) -> dict[str, Any]:
    return {
        "providers": {"default": {"base_url": llm.base_url, "api_key": "test-key"}},
        "models": {"default": {"model_id": "fake-model"}},
        "gateway": {"port": 0, "shutdown_timeout_secs": 10},
        "logging": {"format": "json", "level": "debug"},
        "mcpServers": servers,
    }


async def _ask(url: str, text: str) -> str:
    async with websockets.connect(url) as ws:
        await ws.send(json.dumps({"type": "hello", "chat_id": "mcp"}))
        await ws.recv()
        await ws.send(json.dumps({"type": "message", "id": "q1", "text": text}))
        while True:
            frame = json.loads(await ws.recv())
            if frame["type"] == "message":
                return str(frame["text"])


async def test_the_token_header_reaches_the_server_and_no_log_line(
    home: Path, llm: FakeOpenAI
) -> None:
    servers = {
        "search": {
            "type": "streamableHttp",
            "headers": {"Authorization": "Bearer ${SEARCH_TOKEN}"},
        }
    }
    async with HttpMcpServer(SECRET) as http:  # answers 401 without exactly this token
        servers["search"]["baseUrl"] = http.url
        llm.add_tool_call("mcp_search_echo", {"text": "found it"})
        llm.add_text("the search server answered")
        gw = await spawn_gateway(_config(llm, servers), home, child_env(home, SEARCH_TOKEN=SECRET))
        try:
            up = await gw.wait_event("mcp_server_up", timeout=60)
            assert up["server"] == "search"
            assert await _ask(gw.ws_url, "search") == "the search server answered"
            assert newest(llm.requests[-1])["content"] == "found it"
        finally:
            assert await gw.stop() == 0
    raw = "\n".join(json.dumps(line) for line in gw.lines)
    assert SECRET not in raw
    assert not gw.events("raw")


async def test_sigterm_leaves_no_stdio_child(home: Path, llm: FakeOpenAI, tmp_path: Path) -> None:
    pid_file = tmp_path / "fs.pid"
    servers = {"fs": stdio_server("--pid-file", str(pid_file))}
    gw = await spawn_gateway(_config(llm, servers), home, child_env(home))
    try:
        await gw.wait_event("mcp_server_up", timeout=60)
        child = int(pid_file.read_text())
        assert not process_gone(child)
        assert os.getpgid(child) == child  # its own process group
        assert os.getpgid(child) != os.getpgid(gw.proc.pid)
    finally:
        code = await gw.stop(signal.SIGTERM)
    assert code == 0
    assert process_gone(child)
