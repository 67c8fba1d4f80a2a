"""The console's logs view (GET /api/ops/logs): a whole gateway, its log
configured as `picobot gateway` configures it (JSON lines, the config's
secrets registered); the lines of a scripted chat turn and of a provider
failure whose message echoes the api key come back as the log wrote them, the key
masked; the cursor gives only what is new; filters and bounds hold."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import structlog

from gateway.ops.logging import MASK, clear_secrets, configure_logging, register_secrets
from gateway.ops.tail import MAX_READ
from tests.fakes.openai_server import FakeOpenAI, openai_error_body
from tests.support import logging_restored, make_config, running_gateway, ws_client

API_KEY = "planted-provider-key-5d2e8b17"  # no credential pattern: only registration masks it
CHAT = "tail-chat-7f3a"
OWN = ("timestamp", "level", "event", "logger")


@pytest.fixture
def written() -> Iterator[io.StringIO]:
    """The gateway's log as `picobot gateway` sets it up: JSON lines to a
    stream, the config's secrets registered."""
    out = io.StringIO()
    with logging_restored():
        configure_logging("info", "json", stream=out)
        register_secrets([API_KEY])
        yield out
    clear_secrets()


async def _logs(http: aiohttp.ClientSession, base: str, **query: Any) -> dict[str, Any]:
    async with http.get(f"{base}/api/ops/logs", params=query) as response:
        assert response.status == 200, await response.text()
        text = await response.text()
        assert API_KEY not in text
        data: dict[str, Any] = json.loads(text)
        return data


async def test_a_turns_lines_arrive_as_the_log_wrote_them_with_the_key_masked(
    home: Path, llm: FakeOpenAI, written: io.StringIO
) -> None:
    config = make_config(home, llm.base_url, providers={"default": {"api_key": API_KEY}})
    async with running_gateway(config) as gw, aiohttp.ClientSession() as http:
        start = (await _logs(http, gw.base_url, limit=1))["last"]

        async with ws_client(gw, CHAT) as client:
            assert await client.ask("hello tail") == "echo: hello tail"
            llm.add_error(400, openai_error_body(400, f"the proxy refused the key {API_KEY}"))
            await client.ask("this one fails")

        page = await _logs(http, gw.base_url, after=start, q=CHAT)
        events = page["events"]
        names = [e["event"] for e in events]
        assert "turn_done" in names
        assert "turn_failed_provider" in names
        assert all(CHAT in json.dumps(e) for e in events)
        assert [e["seq"] for e in events] == sorted(e["seq"] for e in events)
        assert all(e["seq"] > start for e in events)
        failed = next(e for e in events if e["event"] == "turn_failed_provider")
        assert failed["level"] == "error"
        assert failed["fields"]["error"].endswith(f"the proxy refused the key {MASK}")

        # each line is the very line the log wrote (its fields, time, level)
        lines = [json.loads(line) for line in written.getvalue().splitlines()]
        assert API_KEY not in written.getvalue()
        by_time = {(line["timestamp"], line["event"]): line for line in lines}
        for event in events:
            line = by_time[(event["time"], event["event"])]
            assert event["level"] == line["level"]
            assert event["logger"] == line.get("logger")
            assert event["fields"] == {k: v for k, v in line.items() if k not in OWN}

        # the cursor: nothing new, then only the next turn's lines
        quiet = await _logs(http, gw.base_url, after=page["last"], q=CHAT)
        assert quiet["events"] == []
        assert not quiet["gap"]
        async with ws_client(gw, CHAT) as client:
            assert await client.ask("once more") == "echo: once more"
        new = await _logs(http, gw.base_url, after=page["last"], q=CHAT)
        assert [e["event"] for e in new["events"]].count("turn_done") == 1
        assert min(e["seq"] for e in new["events"]) > page["last"]

        # the level filter: the turn's info lines go, its error stays
        errors = await _logs(http, gw.base_url, after=start, q=CHAT, level="error")
        assert [e["event"] for e in errors["events"]] == ["turn_failed_provider"]
        # the text filter: another chat's text matches none of them
        assert (await _logs(http, gw.base_url, after=start, q="no-such-chat-x"))["events"] == []


async def test_bad_queries_are_refused_and_reads_are_bounded(
    home: Path, llm: FakeOpenAI, written: io.StringIO
) -> None:
    async with (
        running_gateway(make_config(home, llm.base_url)) as gw,
        aiohttp.ClientSession() as http,
    ):
        for query in (
            {"level": "verbose"},
            {"after": "-1"},
            {"after": "1e3"},
            {"limit": "many"},
            {"q": "x" * 201},
        ):
            async with http.get(f"{gw.base_url}/api/ops/logs", params=query) as response:
                assert response.status == 400, query
                assert (await response.json())["error"]

        log = structlog.get_logger("picobot.test")
        for i in range(MAX_READ + 50):
            log.info("filler_line", i=i)
        page = await _logs(http, gw.base_url, limit=10**9, q="filler_line")
        assert len(page["events"]) == MAX_READ
        assert page["events"][-1]["fields"] == {"i": MAX_READ + 49}
        assert page["events"][0]["fields"] == {"i": 50}
