"""MCP through the whole gateway: real FastMCP servers (tests/mcp_servers), the
fake LLM scripting tool calls, the WebSocket client asking. No tool silently
vanishes: the model is told which server is down, and a server that comes
back is offered again without a gateway restart."""

from __future__ import annotations

import asyncio
import base64
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from agent.mcp.server import ServerState
from gateway.app import Gateway
from storage.sqlite.db import Database
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.openai_server import FakeOpenAI
from tests.mcp_servers.harness import HttpMcpServer, free_port, stdio_server
from tests.support import make_config, newest, running_gateway, ws_client

TOKEN = "mcp-e2e-token-5f0c2a9b81"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


async def until(gw: Gateway, condition: Callable[[], bool], timeout: float = 60) -> None:
    """Wait for a change of the gateway's MCP servers that makes `condition` true.
    Generous: after an outage the next attempt may be several backoff steps away."""
    assert gw.mcp is not None
    async with asyncio.timeout(timeout):
        await gw.mcp.wait_until(condition)


def up(gw: Gateway, key: str) -> Callable[[], bool]:
    assert gw.mcp is not None
    servers = gw.mcp.servers
    return lambda: servers[key].state is ServerState.UP


def down(gw: Gateway, key: str) -> Callable[[], bool]:
    is_up = up(gw, key)
    return lambda: not is_up()


def tool_names(request: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools", [])]


def system_lines(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "system"]


def unavailable_line(key: str) -> str:
    return f"MCP server `{key}` is unavailable; its tools are not offered."


async def _get(gw: Gateway, path: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as http, http.get(f"{gw.base_url}{path}") as resp:
        return resp.status, await resp.text()


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def test_a_stdio_tool_round_trips_through_the_model(home: Path, llm: FakeOpenAI) -> None:
    loaded = make_config(home, llm.base_url, mcpServers={"fs": stdio_server()})
    llm.add_tool_call("mcp_fs_echo", {"text": "ping"})
    llm.add_text("the server said ping")
    async with running_gateway(loaded) as gw, ws_client(gw) as client:
        await until(gw, up(gw, "fs"))
        assert await client.ask("call echo") == "the server said ping"
        status, body = await _get(gw, "/ready")
        _, metrics = await _get(gw, "/metrics")
    first, second = llm.requests[0], llm.requests[1]
    assert "mcp_fs_echo" in tool_names(first)
    assert "calculator" in tool_names(first)  # next to the built-ins
    assert not [line for line in system_lines(first) if "MCP server" in line]
    result = newest(second)
    assert (result["role"], result["content"]) == ("tool", "ping")

    async with Database(loaded.storage_path) as db:
        rows = await db.read(
            lambda c: c.execute(
                "SELECT name, content FROM messages WHERE session_id = 'chat-1' AND role = 'tool'"
            ).fetchall()
        )
    assert [(r["name"], r["content"]) for r in rows] == [("mcp_fs_echo", "ping")]

    assert status == 200
    ready = json.loads(body)
    assert ready["status"] == "ready"
    assert ready["mcp"]["fs"]["state"] == "up"
    assert ready["mcp"]["fs"]["transport"] == "stdio"
    assert ready["mcp"]["fs"]["tools"] >= 3
    m = _samples(metrics)
    fs = (("server", "fs"),)
    assert m[("picobot_mcp_server_up", fs)] == 1
    assert m[("picobot_mcp_calls_total", (("outcome", "ok"), ("server", "fs")))] == 1
    assert m[("picobot_mcp_call_duration_seconds_count", fs)] == 1


async def test_chats_are_answered_while_servers_start_or_are_down(
    home: Path, llm: FakeOpenAI, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    os.mkfifo(gate)  # the slow server waits on it for as long as this test runs
    servers = {
        "slow": stdio_server("--gate", str(gate)),
        "web": {"type": "http", "url": f"http://127.0.0.1:{free_port()}/mcp"},
    }
    loaded = make_config(home, llm.base_url, mcpServers=servers)
    async with running_gateway(loaded) as gw, ws_client(gw) as client:
        status, body = await _get(gw, "/ready")
        assert status == 200  # MCP never decides readiness
        states = {k: v["state"] for k, v in json.loads(body)["mcp"].items()}
        assert states["slow"] == "connecting"
        assert states["web"] in ("connecting", "down")
        assert await client.ask("hello") == "echo: hello"
        await until(
            gw, lambda: gw.mcp is not None and gw.mcp.servers["web"].state is ServerState.DOWN
        )
        status, body = await _get(gw, "/ready")
        web = json.loads(body)["mcp"]["web"]
        assert status == 200
        assert web["state"] == "down"
        assert "cannot reach" in web["error"]
        assert await client.ask("still there?") == "echo: still there?"
    for request in llm.requests:
        assert not [n for n in tool_names(request) if n.startswith("mcp_")]
        assert (
            "MCP servers `slow`, `web` are unavailable; their tools are not offered."
            in system_lines(request)
        )


async def test_an_http_server_outage_is_told_to_the_model_and_healed_without_restart(
    home: Path, llm: FakeOpenAI
) -> None:
    async with HttpMcpServer(TOKEN) as http:
        loaded = make_config(home, llm.base_url, mcpServers={"web": http.entry(headers=AUTH)})
        async with running_gateway(loaded) as gw, ws_client(gw) as client:
            await until(gw, up(gw, "web"))
            await http.kill()
            await until(gw, down(gw, "web"))
            assert await client.ask("during the outage") == "echo: during the outage"
            during = llm.requests[-1]
            assert not [n for n in tool_names(during) if n.startswith("mcp_web_")]
            assert unavailable_line("web") in system_lines(during)

            await http.start()  # the same port
            await until(gw, up(gw, "web"))
            llm.add_tool_call("mcp_web_echo", {"text": "back"})
            llm.add_text("it is back")
            assert await client.ask("and now?") == "it is back"
    after = llm.requests[-2]
    assert "mcp_web_echo" in tool_names(after)
    assert unavailable_line("web") not in system_lines(after)
    assert newest(llm.requests[-1])["content"] == "back"


async def test_a_server_down_at_gateway_start_is_offered_once_it_comes_up(
    home: Path, llm: FakeOpenAI
) -> None:
    http = HttpMcpServer(TOKEN, port=free_port())
    loaded = make_config(home, llm.base_url, mcpServers={"web": http.entry(headers=AUTH)})
    async with running_gateway(loaded) as gw, ws_client(gw) as client:
        assert await client.ask("before") == "echo: before"
        assert unavailable_line("web") in system_lines(llm.requests[-1])
        assert "mcp_web_echo" not in tool_names(llm.requests[-1])
        async with http:
            await until(gw, up(gw, "web"))
            assert await client.ask("after") == "echo: after"
    assert "mcp_web_echo" in tool_names(llm.requests[-1])
    assert unavailable_line("web") not in system_lines(llm.requests[-1])


async def test_a_stdio_server_crashing_mid_call_gives_an_error_result_then_works_again(
    home: Path, llm: FakeOpenAI
) -> None:
    loaded = make_config(home, llm.base_url, mcpServers={"fs": stdio_server()})
    llm.add_tool_call("mcp_fs_crash", {})
    llm.add_text("the server crashed")
    async with running_gateway(loaded) as gw, ws_client(gw) as client:
        await until(gw, up(gw, "fs"))
        assert await client.ask("crash it") == "the server crashed"
        result = newest(llm.requests[-1])
        assert result["role"] == "tool"
        assert result["content"].startswith("Error: MCP server `fs` dropped the connection")
        await until(gw, up(gw, "fs"))  # restarted
        llm.add_tool_call("mcp_fs_echo", {"text": "alive"})
        llm.add_text("it works again")
        assert await client.ask("try again") == "it works again"
    assert newest(llm.requests[-1])["content"] == "alive"


async def test_a_tool_added_by_the_server_is_offered_from_the_next_turn(
    home: Path, llm: FakeOpenAI
) -> None:
    loaded = make_config(home, llm.base_url, mcpServers={"fs": stdio_server()})
    llm.add_tool_call("mcp_fs_grow", {})
    llm.add_text("grown")
    async with running_gateway(loaded) as gw, ws_client(gw) as client:
        await until(gw, up(gw, "fs"))
        assert await client.ask("grow") == "grown"
        assert "mcp_fs_shout" not in tool_names(llm.requests[-1])  # not within that turn
        assert gw.mcp is not None
        mcp = gw.mcp
        await until(gw, lambda: "mcp_fs_shout" in [s.name for s in mcp.specs()])
        assert await client.ask("next") == "echo: next"
    assert "mcp_fs_shout" in tool_names(llm.requests[-1])


PNG_URI = "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 24).decode()


def check_tool_runs(messages: list[dict[str, Any]]) -> None:
    """Chat completions' rules: an assistant's tool calls are answered by tool
    messages right after it, one per call, and a tool message holds text only."""
    for i, message in enumerate(messages):
        if message["role"] == "tool":
            assert isinstance(message["content"], str)
        calls = message.get("tool_calls") or []
        answers = messages[i + 1 : i + 1 + len(calls)]
        assert [m["role"] for m in answers] == ["tool"] * len(calls)
        assert [m["tool_call_id"] for m in answers] == [c["id"] for c in calls]


async def test_an_image_result_reaches_a_vision_model_as_an_image(
    home: Path, llm: FakeOpenAI
) -> None:
    loaded = make_config(home, llm.base_url, mcpServers={"fs": stdio_server()})
    llm.add_tool_calls([("mcp_fs_picture", {}), ("mcp_fs_echo", {"text": "and text"})])
    llm.add_text("a black square")
    async with running_gateway(loaded) as gw, ws_client(gw) as client:
        await until(gw, up(gw, "fs"))
        assert await client.ask("show me the picture") == "a black square"
    messages = llm.requests[1]["messages"]
    check_tool_runs(messages)
    at = next(i for i, m in enumerate(messages) if m["role"] == "tool")
    picture, echo, shown = messages[at : at + 3]
    assert picture["content"] == "[image image/png, 32 bytes: attached]"
    assert echo["content"] == "and text"
    assert shown["role"] == "user"  # after the whole run: nothing may come between
    assert shown["content"][0]["type"] == "text"
    assert picture["tool_call_id"] in shown["content"][0]["text"]
    assert shown["content"][1] == {"type": "image_url", "image_url": {"url": PNG_URI}}
    async with Database(loaded.storage_path) as db:
        rows = await db.read(
            lambda c: c.execute(
                "SELECT media FROM messages WHERE role = 'tool' AND name = 'mcp_fs_picture'"
            ).fetchall()
        )
    [path] = json.loads(rows[0]["media"])
    assert Path(path).is_relative_to(loaded.media_dir)


async def test_a_model_without_vision_gets_the_image_as_a_placeholder(
    home: Path, llm: FakeOpenAI
) -> None:
    loaded = make_config(
        home,
        llm.base_url,
        mcpServers={"fs": stdio_server()},
        models={"default": {"model_id": "fake-model", "supports_vision": False}},
    )
    llm.add_tool_call("mcp_fs_picture", {})
    llm.add_text("I cannot see it")
    async with running_gateway(loaded) as gw, ws_client(gw) as client:
        await until(gw, up(gw, "fs"))
        assert await client.ask("show me the picture") == "I cannot see it"
    messages = llm.requests[1]["messages"]
    result = newest(llm.requests[1])
    assert result["role"] == "tool"
    assert result["content"] == "[image image/png, 32 bytes: not shown to the model]"
    assert not [m for m in messages if m["role"] == "user" and not isinstance(m["content"], str)]


async def test_an_image_result_reaches_claude_inside_its_tool_result(home: Path) -> None:
    async with FakeAnthropic() as claude:
        claude.add_tool_call("mcp_fs_picture", {}, call_id="toolu_pic")
        claude.add_text("a black square")
        loaded = make_config(
            home,
            "http://unused.invalid/v1",
            providers={
                "claude": {"type": "anthropic", "base_url": claude.base_url, "api_key": "ak"}
            },
            models={"sonnet": {"model_id": "claude-test", "max_tokens": 512}},
            agents={"default": {"provider": "claude", "model": "sonnet"}},
            mcpServers={"fs": stdio_server()},
        )
        async with running_gateway(loaded) as gw, ws_client(gw) as client:
            await until(gw, up(gw, "fs"))
            assert await client.ask("show me the picture") == "a black square"
        second = claude.requests[1]
    results = [
        block
        for message in second["messages"]
        for block in message["content"]
        if block["type"] == "tool_result"
    ]
    [result] = results
    assert result["tool_use_id"] == "toolu_pic"
    image, text = result["content"]
    assert image == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": PNG_URI.split(",")[1]},
    }
    assert text["type"] == "text"
    assert text["text"] == "[image image/png, 32 bytes: attached]"
