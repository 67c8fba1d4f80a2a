"""picobot as an MCP server (channels/api/mcp_server.py, docs/mcp-server.md),
with the official `mcp` SDK as the client: over streamable HTTP at the
gateway's /mcp and over stdio through `picobot mcp serve`. The tools list,
a message sent and its reply, the session's history, and no key, no access."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import httpx
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.fakes.openai_server import FakeOpenAI
from tests.support import PICOBOT, child_env, make_config, running_gateway

KEY = "key-claude-desktop-0123"
OTHER = "key-someone-else-4567"
TOOLS = ["list_sessions", "read_history", "send_message"]


def _config(home: Path, llm: FakeOpenAI) -> Any:
    return make_config(
        home,
        llm.base_url,
        channels={"api": {"enabled": True, "keys": {"desk": KEY, "other": OTHER}}},
    )


async def _exercise(session: ClientSession) -> None:
    """What both transports must do: the same tools and answers."""
    await session.initialize()
    listed = await session.list_tools()
    assert sorted(t.name for t in listed.tools) == TOOLS
    sent = await session.call_tool("send_message", {"text": "hello mcp", "session": "notes"})
    assert not sent.isError
    assert sent.content[0].text == "echo: hello mcp"  # type: ignore[union-attr]
    history = await session.call_tool("read_history", {"session": "notes"})
    messages = json.loads(history.content[0].text)["messages"]  # type: ignore[union-attr]
    assert [(m["role"], m["text"]) for m in messages][-2:] == [
        ("user", "hello mcp"), ("assistant", "echo: hello mcp"),
    ]  # fmt: skip
    sessions = await session.call_tool("list_sessions", {})
    assert "notes" in json.loads(sessions.content[0].text)  # type: ignore[union-attr]
    bad = await session.call_tool("send_message", {"text": "x", "session": "no spaces!"})
    assert bad.isError


async def test_over_streamable_http(home: Path, llm: FakeOpenAI) -> None:
    async with running_gateway(_config(home, llm)) as gw:
        url = f"http://127.0.0.1:{gw.port}/mcp"
        headers = {"Authorization": f"Bearer {KEY}"}
        async with (
            httpx.AsyncClient(headers=headers) as http,
            streamable_http_client(url, http_client=http) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await _exercise(session)
        async with (  # another key names the same session: it is its own, empty
            httpx.AsyncClient(headers={"Authorization": f"Bearer {OTHER}"}) as http,
            streamable_http_client(url, http_client=http) as (read, write, _),
            ClientSession(read, write) as other,
        ):
            await other.initialize()
            history = await other.call_tool("read_history", {"session": "notes"})
            assert json.loads(history.content[0].text)["messages"] == []  # type: ignore[union-attr]
            sessions = await other.call_tool("list_sessions", {})
            assert json.loads(sessions.content[0].text) == []  # type: ignore[union-attr]
        async with aiohttp.ClientSession() as http:
            probe = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
            async with http.post(url, json=probe) as refused:
                assert refused.status == 401
            wrong = {"Authorization": "Bearer not-the-key"}
            async with http.post(url, json=probe, headers=wrong) as refused:
                assert refused.status == 401


async def test_over_stdio_through_picobot_mcp_serve(home: Path, llm: FakeOpenAI) -> None:
    loaded = _config(home, llm)
    async with running_gateway(loaded) as gw:
        params = StdioServerParameters(
            command=PICOBOT,
            args=["mcp", "serve", "--url", f"http://127.0.0.1:{gw.port}/mcp", "--key", KEY],
            env=child_env(home),
        )
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await _exercise(session)
