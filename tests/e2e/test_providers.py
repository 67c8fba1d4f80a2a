"""Providers through the whole gateway: streaming to the WebSocket client,
retries, an Anthropic tool round trip, per-channel tool narrowing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.prompt_file import DEFAULT_AGENT_PROMPT, prompt_text
from storage.sqlite.db import Database
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.support import conversation, make_config, running_gateway, ws_client

# Streamed pieces closer together than this interval go out joined (50 ms as
# shipped). The tests below set it wide of their pieces' pace, so that a loop
# stalled for a moment on a loaded machine does not decide their outcome.
INTERVAL = "gateway.turns.feedback._DELTA_INTERVAL_SECS"


async def test_streamed_reply_reaches_the_client_as_deltas(
    home: Path, llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(INTERVAL, 0.15)  # ten pieces 30 ms apart: at least two deltas, not ten
    text = "Streaming replies arrive piece by piece for the terminal client."
    llm.add_reply(Reply(text=text, chunk_delay=0.03))  # ten words over 0.3 s
    async with running_gateway(make_config(home, llm.base_url)) as gw, ws_client(gw) as client:
        msg_id = await client.send("stream please")
        deltas: list[str] = []
        while True:
            frame = await client.recv()
            if frame["type"] == "delta":
                deltas.append(frame["text"])
            elif frame["type"] == "message":
                break
    assert llm.requests[0]["stream"] is True
    assert len(deltas) >= 2
    assert len(deltas) < 10  # words closer than the interval are joined into fewer events
    assert "".join(deltas) == text
    assert frame["reply_to"] == msg_id
    assert frame["text"] == "".join(deltas)  # the persisted, final message


async def test_a_reply_streamed_whole_within_the_interval_comes_as_one_message(
    home: Path, llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(INTERVAL, 5.0)  # the whole turn takes milliseconds
    llm.add_text("warmed up")
    llm.add_text("Quick answer, streamed in ten chunks back to back by the fake model.")
    async with running_gateway(make_config(home, llm.base_url)) as gw, ws_client(gw) as client:
        await client.ask("warm up")  # a gateway's first turn is slower (lazy imports)
        await client.send("quick")
        kinds: list[str] = []
        while (frame := await client.recv())["type"] != "message":
            kinds.append(frame["type"])
    assert llm.requests[1]["stream"] is True
    assert "ack" in kinds
    assert "delta" not in kinds  # the message carries the whole text
    assert frame["text"] == "Quick answer, streamed in ten chunks back to back by the fake model."


async def test_text_before_a_tool_call_is_shown_before_the_tool_runs(
    home: Path, llm: FakeOpenAI
) -> None:
    llm.add_text("warmed up")
    llm.add_tool_call("bash", {"command": "true"}, text="Let me check.")
    llm.add_text("All good.")
    async with running_gateway(make_config(home, llm.base_url)) as gw, ws_client(gw) as client:
        await client.ask("warm up")  # a gateway's first turn is slower (lazy imports)
        await client.send("check it")
        kinds: list[tuple[str, str]] = []
        while (frame := await client.recv())["type"] != "message":
            kinds.append((frame["type"], frame.get("text", frame.get("status", ""))))
    first_tool = next(i for i, (kind, _) in enumerate(kinds) if kind == "tool")
    # the stream may arrive in one delta or several, depending on how the chunks fall
    shown = "".join(text for kind, text in kinds[:first_tool] if kind == "delta")
    assert shown == "Let me check."
    assert frame["text"] == "All good."


async def test_rate_limit_then_success_gives_one_reply(home: Path, llm: FakeOpenAI) -> None:
    llm.add_error(429, headers={"Retry-After": "1"})
    llm.add_text("made it")
    loaded = make_config(home, llm.base_url, providers={"default": {"max_retries": 2}})
    async with running_gateway(loaded) as gw, ws_client(gw) as client:
        assert await client.ask("hello") == "made it"
    assert len(llm.requests) == 2


async def test_server_errors_end_in_a_clear_message_and_a_whole_transcript(
    home: Path, llm: FakeOpenAI
) -> None:
    llm.add_tool_call("calculator", {"expression": "1+1"})

    async def always_500(body: dict[str, object]) -> Reply | None:
        return Reply(status=500) if len(llm.requests) > 1 else None

    llm.responder = always_500
    loaded = make_config(
        home, llm.base_url, providers={"default": {"max_retries": 2, "retry_max_wait_secs": 0.2}}
    )
    async with running_gateway(loaded) as gw, ws_client(gw) as client:
        reply = await client.ask("add one and one")
    assert reply.startswith("The model provider is unavailable right now")
    assert "500" not in reply  # no internal detail reaches the chat
    # the tool round, then the first try and at most max_retries (the wait budget may stop them sooner)
    assert 3 <= len(llm.requests) <= 4
    async with Database(loaded.storage_path) as db:
        rows = await db.read(
            lambda c: c.execute(
                "SELECT role, tool_calls, tool_call_id FROM messages WHERE role != 'system' ORDER BY seq"
            ).fetchall()
        )
    assert [r["role"] for r in rows] == ["user", "assistant", "tool"]
    call_id = json.loads(rows[1]["tool_calls"])[0]["id"]
    assert rows[2]["tool_call_id"] == call_id  # no tool call is left without its result


async def test_anthropic_tool_round_trip_through_the_gateway(home: Path) -> None:
    async with FakeAnthropic() as claude:
        claude.add_tool_call("calculator", {"expression": "6*7"}, call_id="toolu_1")
        claude.add_text("It is 42.")
        loaded = make_config(
            home,
            "http://unused.invalid/v1",
            providers={
                "claude": {"type": "anthropic", "base_url": claude.base_url, "api_key": "ak"}
            },
            models={"sonnet": {"model_id": "claude-test", "max_tokens": 512}},
            agents={
                "default": {"provider": "claude", "model": "sonnet", "system_prompt": "Be brief."}
            },
            skills={"enabled": False},  # the exact request shape, without per-turn blocks
        )
        async with running_gateway(loaded) as gw, ws_client(gw) as client:
            assert await client.ask("what is 6*7?") == "It is 42."
        first, second = claude.requests
    assert first["model"] == "claude-test"
    assert first["max_tokens"] == 512
    cached = {"type": "ephemeral"}
    assert first["system"] == [  # agent extras, then AGENT.md: blocks, the stable one marked
        {"type": "text", "text": "Be brief."},
        {"type": "text", "text": prompt_text(DEFAULT_AGENT_PROMPT), "cache_control": cached},
    ]
    assert any(t["name"] == "calculator" and "input_schema" in t for t in first["tools"])
    assert first["tools"][-1]["cache_control"] == cached
    assert first["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "what is 6*7?", "cache_control": cached}],
        }
    ]
    assert second["messages"][1] == {
        "role": "assistant",
        "content": [
            {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "calculator",
                "input": {"expression": "6*7"},
            }
        ],
    }
    assert second["messages"][0]["content"][0] == {"type": "text", "text": "what is 6*7?"}
    assert second["messages"][2] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_1",
                "content": "42",
                "cache_control": cached,  # the latest history prefix
            }
        ],
    }


async def test_channel_tool_filter_narrows_what_the_model_sees(home: Path, llm: FakeOpenAI) -> None:
    loaded = make_config(
        home,
        llm.base_url,
        channels={
            "websocket": {"tools": {"allow": ["calculator", "get_time", "bash"], "deny": ["bash"]}}
        },
        tools={"disabled": ["get_time"]},
    )
    async with running_gateway(loaded) as gw, ws_client(gw) as client:
        await client.ask("hi")
    names = [t["function"]["name"] for t in llm.requests[0]["tools"]]
    assert names == ["calculator"]
    assert conversation(llm.requests[0])[-1]["content"] == "hi"
