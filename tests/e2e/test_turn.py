"""A whole turn through real sockets: WebSocket client → gateway → fake LLM → back."""

from __future__ import annotations

import json
from pathlib import Path

from storage.sqlite.db import Database
from tests.fakes.openai_server import FakeOpenAI
from tests.support import conversation, make_config, running_gateway, ws_client


async def test_calculator_turn_persists_in_real_order(home: Path, llm: FakeOpenAI) -> None:
    llm.add_tool_call("calculator", {"expression": "6*7"})
    llm.add_text("6 times 7 is 42.")
    loaded = make_config(home, llm.base_url)
    async with running_gateway(loaded) as gw, ws_client(gw) as client:
        reply = await client.ask("what is 6*7? use the calculator")
    assert reply == "6 times 7 is 42."

    # the second request carried the tool result back to the model
    second = conversation(llm.requests[1])
    assert second[-1]["role"] == "tool"
    assert second[-1]["content"] == "42"
    assert second[-2]["tool_calls"][0]["function"]["name"] == "calculator"

    async with Database(loaded.storage_path) as db:
        rows = await db.read(
            lambda c: c.execute(
                "SELECT role, content, tool_calls, tool_call_id FROM messages "
                "WHERE session_id = 'chat-1' ORDER BY seq"
            ).fetchall()
        )
    roles = [r["role"] for r in rows]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]  # AGENT.md first
    assert rows[1]["content"] == "what is 6*7? use the calculator"
    call = json.loads(rows[2]["tool_calls"])[0]
    assert call["name"] == "calculator"
    assert rows[3]["tool_call_id"] == call["id"]
    assert rows[4]["content"] == "6 times 7 is 42."


async def test_typing_frames_come_only_for_a_turn_slower_than_the_delay(
    home: Path, llm: FakeOpenAI
) -> None:
    loaded = make_config(home, llm.base_url, gateway={"typing_delay_secs": 1.0})
    shown = {"ack", "working", "idle", "message"}
    async with running_gateway(loaded) as gw, ws_client(gw) as client:

        async def frames_until_reply(msg_id: str) -> list[str]:
            kinds: list[str] = []
            while True:
                frame = await client.recv()
                if frame["type"] in shown:
                    kinds.append(frame["type"])
                if frame["type"] == "message" and frame.get("reply_to") == msg_id:
                    return kinds

        await client.ask("warm up")  # a gateway's first turn is slower (lazy imports)
        quick = await client.send("quick")
        assert await frames_until_reply(quick) == ["ack", "message"]
        llm.delay = 1.5
        slow = await client.send("slow")
        assert await frames_until_reply(slow) == ["ack", "working", "idle", "message"]


async def test_a_failed_turns_question_is_not_sent_to_the_model_again(
    home: Path, llm: FakeOpenAI
) -> None:
    """The user is told the turn failed and asks again: the model sees the
    question once. The failed turn's message stays in the database."""
    llm.add_error(500)
    loaded = make_config(home, llm.base_url)
    async with running_gateway(loaded) as gw, ws_client(gw) as client:
        failed = await client.ask("what is the capital of France?")
        assert "unavailable" in failed
        assert await client.ask("what is the capital of France?") == (
            "echo: what is the capital of France?"
        )
        assert await client.ask("thanks") == "echo: thanks"
        status = await client.ask("/status")
    assert [(m["role"], m["content"]) for m in conversation(llm.requests[-1])] == [
        ("user", "what is the capital of France?"),
        ("assistant", "echo: what is the capital of France?"),
        ("user", "thanks"),
    ]
    assert "Messages in the active history: 5" in status  # AGENT.md + 2 turns
    async with Database(loaded.storage_path) as db:
        rows = await db.read(
            lambda c: c.execute(
                "SELECT role, marker FROM messages WHERE session_id = 'chat-1' ORDER BY seq"
            ).fetchall()
        )
    assert [(r["role"], r["marker"]) for r in rows][:2] == [
        ("system", "agent_prompt"),
        ("user", "failed_turn"),
    ]
