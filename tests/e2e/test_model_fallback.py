"""Model fallback through the running gateway (issue 56's must-show).

The primary model (OpenAI-compatible fake) answers 429 with a Retry-After of
an hour, past its retry budget, for every call; the agent's fallback is the
Anthropic fake. Turns with a tool round are answered by the fallback, the
OpenAI-made tool calls in the history reach it as tool_use/tool_result
blocks, /status and /metrics say so, and once the primary answers again
(after `fallback_retry_secs`) the next turn is its, with the Anthropic-made
tool calls in the history as OpenAI tool_calls."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from gateway.config.core import ConfigError
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.support import ShiftedClock, make_config, running_gateway, ws_client

RETRY_SECS = 30  # how long the failed primary is skipped (agents.<name>.fallback_retry_secs)


def fallback_sections(anthropic: FakeAnthropic) -> dict[str, Any]:
    return {
        "providers": {
            # one retry, whose wait (the budget) is far below the Retry-After
            "default": {"max_retries": 2, "retry_max_wait_secs": 0.05},
            "claude": {
                "type": "anthropic",
                "base_url": anthropic.base_url,
                "api_key": "test-key",
                "max_retries": 0,
            },
        },
        "models": {"claude": {"model_id": "claude-fake", "context_window_tokens": 200_000}},
        "agents": {
            "default": {
                "fallbacks": [{"provider": "claude", "model": "claude"}],
                "fallback_retry_secs": RETRY_SECS,
            }
        },
    }


def blocks(body: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [
        block
        for message in body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == kind
    ]


async def fallback_count(base_url: str) -> float:
    async with aiohttp.ClientSession() as http, http.get(f"{base_url}/metrics") as resp:
        text = await resp.text()
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "picobot_model_fallback_total"
        and s.labels.get("from_model") == "fake-model"
        and s.labels.get("to_model") == "claude-fake"
        and s.labels.get("agent") == "default"
    )


async def test_a_rate_limited_primary_hands_turns_to_the_fallback_and_gets_them_back(
    home: Path, llm: FakeOpenAI
) -> None:
    down = True

    async def primary_down(_: dict[str, Any]) -> Reply | None:
        if down:
            return Reply(status=429, headers={"Retry-After": "3600"})
        return None  # the script

    async with FakeAnthropic() as claude:
        claude.api_key = "test-key"
        loaded = make_config(home, llm.base_url, **fallback_sections(claude))
        clock = ShiftedClock()
        async with running_gateway(loaded, clock=clock) as gw, ws_client(gw) as client:
            # 1. the primary answers, with a tool round: OpenAI-made calls in the history
            down = False
            llm.add_tool_call("bash", {"command": "echo one"}, call_id="call_first")
            llm.add_text("first done")
            assert await client.ask("run one", timeout=20) == "first done"

            # 2. the primary refuses every call: the fallback answers, tool round included
            down = True
            llm.responder = primary_down
            before = len(llm.requests)
            claude.add_tool_call("bash", {"command": "echo two"}, call_id="toolu_second")
            claude.add_text("second done")
            assert await client.ask("run two", timeout=20) == "second done"
            assert len(llm.requests) - before >= 2  # asked, retried once, then given up on
            assert await fallback_count(gw.base_url) >= 2  # both calls of the turn
            status = await client.ask("/status")
            assert "fallback model claude-fake" in status

            # 3. the primary answers again: after its wait, the next turn is its own
            down = False
            llm.add_text("third done")
            clock.advance(seconds=RETRY_SECS)  # the gateway's clock times the wait
            asked_claude = len(claude.requests)
            assert await client.ask("run three", timeout=20) == "third done"
            assert len(claude.requests) == asked_claude
            assert "fallback model" not in await client.ask("/status")

    # the fallback got the primary's tool call as Anthropic blocks
    first = claude.requests[0]
    assert first["model"] == "claude-fake"
    [use] = [b for b in blocks(first, "tool_use") if b["id"] == "call_first"]
    assert use["name"] == "bash"
    assert use["input"] == {"command": "echo one"}  # the JSON text as an object
    [result] = blocks(first, "tool_result")
    assert result["tool_use_id"] == "call_first"
    assert "one" in json.dumps(result["content"])
    # every tool_use is answered by a tool_result in the next message (else a 400)
    second = claude.requests[1]
    assert {b["id"] for b in blocks(second, "tool_use")} == {"call_first", "toolu_second"}
    assert {b["tool_use_id"] for b in blocks(second, "tool_result")} == {
        "call_first",
        "toolu_second",
    }

    # back on the primary: the fallback's tool call as an OpenAI tool call
    last = llm.requests[-1]
    assert last["model"] == "fake-model"
    calls = [
        c for m in last["messages"] if m["role"] == "assistant" for c in m.get("tool_calls") or ()
    ]
    assert [c["id"] for c in calls] == ["call_first", "toolu_second"]
    assert json.loads(calls[1]["function"]["arguments"]) == {"command": "echo two"}
    assert isinstance(calls[1]["function"]["arguments"], str)
    results = [m["tool_call_id"] for m in last["messages"] if m["role"] == "tool"]
    assert results == ["call_first", "toolu_second"]


def test_fallbacks_naming_an_unknown_provider_or_model_are_refused(home: Path) -> None:
    fallbacks = [{"provider": "nope", "model": "default"}, {"provider": "default", "model": "gone"}]
    with pytest.raises(ConfigError) as raised:
        make_config(home, "http://127.0.0.1:9/v1", agents={"default": {"fallbacks": fallbacks}})
    message = str(raised.value)
    assert "agents.default.fallbacks[0].provider: no provider named 'nope'" in message
    assert "agents.default.fallbacks[1].model: no model named 'gone'" in message


def test_a_fallback_temperature_its_provider_refuses_is_refused(home: Path) -> None:
    sections = {
        "providers": {"claude": {"type": "anthropic", "api_key": "k"}},
        "models": {"hot": {"model_id": "claude-fake", "temperature": 1.5}},
        "agents": {"default": {"fallbacks": [{"provider": "claude", "model": "hot"}]}},
    }
    with pytest.raises(ConfigError, match=r"models\.hot\.temperature 1\.5 is out of range"):
        make_config(home, "http://127.0.0.1:9/v1", **sections)
