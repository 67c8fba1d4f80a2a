"""Steer: a message mid-turn ends the turn at its next safe boundary and takes
over (docs/approvals.md#steer), through a real gateway and the fake LLM."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from gateway.app import Gateway
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.support import conversation, make_config, newest, running_gateway, ws_client


class SecondCallHeld:
    """Holds the LLM's second request until released (the steering message
    arrives while it runs)."""

    def __init__(self, llm: FakeOpenAI) -> None:
        self.llm = llm
        self.arrived = asyncio.Event()
        self.go = asyncio.Event()
        llm.responder = self

    async def __call__(self, body: dict[str, Any]) -> Reply | None:
        if len(self.llm.requests) == 2:
            self.arrived.set()
            await self.go.wait()
        return None  # the script answers


async def queued(gw: Gateway) -> None:
    """Until the steering message waits in its chat's queue (no event for it:
    looks every 10 ms)."""
    assert gw.sessions is not None
    async with asyncio.timeout(10):
        while gw.sessions.pending_messages < 1:
            await asyncio.sleep(0.01)


@pytest.mark.parametrize(
    ("mode", "steering"),
    [("collect", "/steer add 3+3 instead"), ("steer", "add 3+3 instead")],
)
async def test_a_steering_message_ends_the_turn_after_the_running_batch(
    home: Path, llm: FakeOpenAI, mode: str, steering: str
) -> None:
    held = SecondCallHeld(llm)
    llm.add_tool_call("calculator", {"expression": "1+1"})
    llm.add_tool_call("calculator", {"expression": "2+2"})
    # the steering message's turn answers: the first turn's third call never comes
    llm.add_text("3+3 is 6.")
    loaded = make_config(home, llm.base_url, gateway={"queue_mode": mode})
    async with running_gateway(loaded) as gw, ws_client(gw) as client:
        first = await client.send("add 1+1, then 2+2")
        await asyncio.wait_for(held.arrived.wait(), 10)
        steer_id = await client.send(steering)
        await queued(gw)
        held.go.set()
        reply = await client.recv_type("message")
    assert reply["reply_to"] == steer_id
    assert reply["text"] == "3+3 is 6."
    assert first != steer_id
    assert len(llm.requests) == 3
    third = llm.requests[2]
    assert newest(third) == {"role": "user", "content": "add 3+3 instead"}
    messages = conversation(third)
    assert [m["role"] for m in messages] == [
        "user", "assistant", "tool", "assistant", "tool", "user",
    ]  # fmt: skip
    assert [m["content"] for m in messages if m["role"] == "tool"] == ["2", "4"]
    # every call has its result
    calls = [c["id"] for m in messages if m["role"] == "assistant" for c in m["tool_calls"]]
    assert calls == [m["tool_call_id"] for m in messages if m["role"] == "tool"]


async def test_without_steer_the_turn_runs_to_its_end(home: Path, llm: FakeOpenAI) -> None:
    held = SecondCallHeld(llm)
    llm.add_tool_call("calculator", {"expression": "1+1"})
    llm.add_tool_call("calculator", {"expression": "2+2"})
    llm.add_text("2 and 4.")
    llm.add_text("3+3 is 6.")
    async with running_gateway(make_config(home, llm.base_url)) as gw, ws_client(gw) as client:
        await client.send("add 1+1, then 2+2")
        await asyncio.wait_for(held.arrived.wait(), 10)
        await client.send("add 3+3 too")
        await queued(gw)
        held.go.set()
        assert (await client.recv_type("message"))["text"] == "2 and 4."
        assert (await client.recv_type("message"))["text"] == "3+3 is 6."
