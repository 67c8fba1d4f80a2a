"""SIGTERM stops a real `picobot gateway` process within
`gateway.shutdown_timeout_secs`, whatever is connected: a stdio MCP server that
ignores both the end of its stdin and SIGTERM, a plain WebSocket client, and
the terminal client's link, which reconnects the moment it is closed (issue 59:
that reconnection was kept open until aiohttp's heartbeat gave up, 46 s)."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import websockets

from gateway.cli.client.link import Link
from tests.fakes.openai_server import FakeOpenAI
from tests.mcp_servers.harness import FS_SERVER
from tests.support import child_env, process_gone, spawn_gateway, wait_until

pytestmark = pytest.mark.slow

TIMEOUT_SECS = 3.0

# fs_server.py, then, once its stdin is closed, a process that will not go:
# SIGTERM is ignored, only SIGKILL ends it.
STUBBORN = f"""
import runpy, signal, sys
signal.signal(signal.SIGTERM, signal.SIG_IGN)
sys.path.insert(0, {str(FS_SERVER.parent)!r})
sys.argv = [{str(FS_SERVER)!r}, "--pid-file", sys.argv[1]]
runpy.run_path(sys.argv[0], run_name="__main__")
while True:  # until SIGKILL
    signal.pause()
"""


def _config(llm: FakeOpenAI, pid_file: Path) -> dict[str, Any]:
    stubborn = {"type": "stdio", "command": sys.executable, "args": ["-c", STUBBORN, str(pid_file)]}
    return {
        "providers": {"default": {"base_url": llm.base_url, "api_key": "test-key"}},
        "models": {"default": {"model_id": "fake-model"}},
        "gateway": {"port": 0, "shutdown_timeout_secs": TIMEOUT_SECS},
        "logging": {"format": "json", "level": "debug"},
        "mcpServers": {"stubborn": stubborn},
    }


async def test_sigterm_stops_within_the_budget_whatever_is_connected(
    home: Path, llm: FakeOpenAI, tmp_path: Path
) -> None:
    pid_file = tmp_path / "mcp.pid"
    gw = await spawn_gateway(_config(llm, pid_file), home, child_env(home))
    link = Link(gw.ws_url, None, "terminal")
    try:
        await gw.wait_event("mcp_server_up", timeout=60)
        child = int(pid_file.read_text())
        async with websockets.connect(gw.ws_url) as plain:
            await plain.send(json.dumps({"type": "hello", "chat_id": "plain"}))
            assert json.loads(await plain.recv())["type"] == "welcome"
            await link.open()
            async with asyncio.TaskGroup() as tg:
                reconnecting = tg.create_task(link.run(), name="terminal-link")
                started = time.monotonic()
                gw.proc.send_signal(signal.SIGTERM)
                code = await gw.stop(sig=None, timeout=TIMEOUT_SECS + 5)
                took = time.monotonic() - started
                reconnecting.cancel()
            async with asyncio.timeout(5):  # closed before the gateway exited
                await plain.wait_closed()
    finally:
        if gw.proc.returncode is None:
            gw.proc.kill()
            await gw.proc.wait()
        await link.close()

    assert code == 0
    assert took < TIMEOUT_SECS + 5, took
    assert plain.close_code == 1001  # going away
    assert not gw.events("ws_protocol_error")
    assert gw.events("gateway_stopped")
    # the server ignored its stdin's end and SIGTERM: its supervisor was cut at
    # the budget's end, which killed it
    assert gw.events("mcp_server_stop_slow")
    await wait_until(lambda: process_gone(child), timeout=5)  # reaped by init once killed
