"""The WebSocket protocol's additions for the web UI (docs/PROTOCOL.md):
the command list in `welcome`, `sessions` and `history` queries of the
client's own chat, and replies marked `earlier` when they were written while
no client was connected."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAI
from tests.support import make_config, replies_written, running_gateway, ws_client


async def test_welcome_lists_the_gateways_commands(home: Path, llm: FakeOpenAI) -> None:
    async with running_gateway(make_config(home, llm.base_url)) as gw:
        url = f"ws://127.0.0.1:{gw.port}/ws"
        import websockets

        async with websockets.connect(url) as ws:
            await ws.send(json.dumps({"type": "hello", "protocol": 1, "chat_id": "c1"}))
            welcome = json.loads(await ws.recv())
    names = [c["name"] for c in welcome["commands"]]
    assert names[:3] == ["help", "new", "sessions"]
    assert {"stop", "status", "use", "rename", "archive", "delete", "compact"} <= set(names)
    assert all(c["help"] for c in welcome["commands"])


async def test_sessions_and_history_of_the_own_chat(home: Path, llm: FakeOpenAI) -> None:
    llm.add_tool_call("calculator", {"expression": "6*7"})
    llm.add_text("It is 42.")
    async with running_gateway(make_config(home, llm.base_url)) as gw, ws_client(gw) as client:
        await client.ask("what is 6*7?")
        await client.ask("/new Second")
        async with ws_client(gw, "other") as other:
            await other.ask("a secret of another chat")

        await client.ws.send(json.dumps({"type": "sessions", "id": "q1"}))
        listing = await client.recv_type("sessions")
        assert listing["id"] == "q1"
        assert listing["active"] == "chat-1#2"
        assert [(s["id"], s["title"], s["archived"]) for s in listing["sessions"]] == [
            ("chat-1", "what is 6*7?", False),  # titled from its first message
            ("chat-1#2", "Second", False),
        ]
        assert listing["sessions"][0]["message_count"] == 5  # AGENT.md, user, call, result, reply

        await client.ws.send(json.dumps({"type": "history", "id": "q2", "session_id": "chat-1"}))
        history = await client.recv_type("history")
        assert (history["id"], history["session_id"], history["more"]) == (
            "q2",
            "chat-1",
            False,
        )
        entries = history["messages"]
        assert [e["role"] for e in entries] == ["user", "assistant", "tool", "assistant"]
        assert entries[0]["text"] == "what is 6*7?"
        call = entries[1]["tool_calls"][0]
        assert (call["name"], json.loads(call["arguments"])) == (
            "calculator",
            {"expression": "6*7"},
        )
        assert (entries[2]["tool_call_id"], entries[2]["text"]) == (call["id"], "42")
        assert entries[3]["text"] == "It is 42."
        assert len({e["run_id"] for e in entries}) == 1  # one turn

        # the current session (empty), a limit, and what is refused
        await client.ws.send(json.dumps({"type": "history", "id": "q3"}))
        current = await client.recv_type("history")
        assert (current["session_id"], current["title"], current["messages"]) == (
            "chat-1#2",
            "Second",
            [],
        )
        await client.ws.send(
            json.dumps({"type": "history", "id": "q4", "session_id": "chat-1", "limit": 2})
        )
        short = await client.recv_type("history")
        assert [e["role"] for e in short["messages"]] == ["tool", "assistant"]
        assert short["more"] is True
        for bad, code in (
            ({"type": "history", "id": "q5", "session_id": "other"}, "not_found"),
            ({"type": "history", "id": "q6", "session_id": "nope"}, "not_found"),
            ({"type": "history", "id": "q7", "limit": 0}, "bad_frame"),
            ({"type": "history", "id": "q8", "limit": "all"}, "bad_frame"),
            ({"type": "sessions"}, "bad_frame"),
        ):
            await client.ws.send(json.dumps(bad))
            error = await client.recv_type("error")
            assert error["code"] == code, bad
            assert "secret" not in error["message"]
        assert await client.ask("still fine?") == "echo: still fine?"


async def test_a_reply_written_while_no_client_was_connected_is_marked_earlier(
    home: Path, llm: FakeOpenAI
) -> None:
    llm.hold()
    async with running_gateway(make_config(home, llm.base_url)) as gw:
        async with ws_client(gw) as client:
            asked = await client.send("slow question")
            await client.recv_type("ack")
            await llm.wait_requests(1)
        llm.release()  # the reply is written now, with nobody connected
        await replies_written(gw)
        async with ws_client(gw) as client:
            away = await client.recv_type("message")
            now = await client.ask("and now?")
            await client.ws.send(json.dumps({"type": "ping", "id": "p"}))
            await client.recv_type("pong")
    assert (away["reply_to"], away["text"], away["earlier"]) == (
        asked,
        "echo: slow question",
        True,
    )
    assert away["run_id"]
    assert away["created_at"]
    assert now == "echo: and now?"


async def test_a_live_reply_is_not_earlier(home: Path, llm: FakeOpenAI) -> None:
    async with running_gateway(make_config(home, llm.base_url)) as gw, ws_client(gw) as client:
        msg_id = await client.send("hi")
        while True:
            frame = await client.recv_type("message")
            if frame["reply_to"] == msg_id:
                break
    assert frame["earlier"] is False
