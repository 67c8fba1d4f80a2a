"""A sub-agent and a session message across a SIGKILL of a real `picobot gateway`
process: one final reply, the child resumed from its stored transcript, the
session message delivered once."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

import pytest
import websockets

from agent.messages import Role
from storage.sqlite.db import Database
from storage.store import Store
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.fakes.telegram_server import FakeTelegram
from tests.support import GatewayProcess, child_env, spawn_gateway

pytestmark = pytest.mark.slow

CHILD_MARK = "You are a sub-agent"


def _config(llm: FakeOpenAI, **extra: Any) -> dict[str, Any]:
    return {
        "providers": {
            "default": {"base_url": llm.base_url, "api_key": "test-key", "max_retries": 0}
        },
        "models": {"default": {"model_id": "fake-model"}},
        "gateway": {"port": 0, "shutdown_timeout_secs": 10, "outbound_retry_base_secs": 0.05},
        "logging": {"format": "json"},
        **extra,
    }


async def _ask(gw: GatewayProcess, chat_id: str, msg_id: str, text: str) -> None:
    async with websockets.connect(gw.ws_url) as ws:
        await ws.send(json.dumps({"type": "hello", "chat_id": chat_id}))
        assert json.loads(await ws.recv())["type"] == "welcome"
        await ws.send(json.dumps({"type": "message", "id": msg_id, "text": text}))
        while json.loads(await asyncio.wait_for(ws.recv(), 10))["type"] != "ack":
            pass


async def _reply(gw: GatewayProcess, chat_id: str) -> dict[str, Any]:
    """The first message frame the chat gets after (re)connecting."""
    async with websockets.connect(gw.ws_url) as ws:
        await ws.send(json.dumps({"type": "hello", "chat_id": chat_id}))
        async with asyncio.timeout(40):
            while True:
                frame: dict[str, Any] = json.loads(await ws.recv())
                if frame["type"] == "message":
                    return frame


async def _kill(gw: GatewayProcess) -> None:
    assert await gw.stop(signal.SIGKILL) == -signal.SIGKILL


async def _outbox(db: Database, chat_id: str) -> list[tuple[str, str]]:
    rows = await db.read(
        lambda c: c.execute(
            "SELECT text, state FROM outbox WHERE chat_id = ? ORDER BY id", (chat_id,)
        ).fetchall()
    )
    return [(r[0], r[1]) for r in rows]


async def test_sigkill_during_a_child_resumes_it_and_answers_once(
    home: Path, llm: FakeOpenAI
) -> None:
    child_arrived = asyncio.Event()
    never = asyncio.Event()
    calls = {"child": 0}

    async def respond(body: dict[str, Any]) -> Reply | None:
        if not any(CHILD_MARK in str(m.get("content")) for m in body["messages"]):
            return None  # the parent: the script
        calls["child"] += 1
        if calls["child"] == 1:
            child_arrived.set()
            await never.wait()  # killed meanwhile
        return Reply(text="child result after restart")

    llm.responder = respond
    llm.add_tool_call("task", {"description": "dig", "prompt": "deep"}, call_id="call-k")
    llm.add_text("final after restart")
    env = child_env(home)
    config = _config(llm)
    try:
        gw = await spawn_gateway(config, home, env)
        await _ask(gw, "kid", "m1", "delegate it")
        await asyncio.wait_for(child_arrived.wait(), 20)
        await _kill(gw)
        gw2 = await spawn_gateway(config, home, env)
        try:
            reply = await _reply(gw2, "kid")
        finally:
            assert await gw2.stop() == 0
    finally:
        never.set()
    assert (reply["reply_to"], reply["text"]) == ("m1", "final after restart")
    assert gw2.events("subagent_resumed")
    async with Database(home / "storage" / "sessions.db") as db:
        store = Store(db)
        child = await store.transcripts.session_messages("task:kid:call-k")
        parent = await store.transcripts.session_messages("kid")
        outbox = await _outbox(db, "kid")
    assert outbox == [("final after restart", "sent")]  # one reply
    # the child's transcript: begun before the kill, continued after it
    assert [m.role for m in child] == [Role.SYSTEM, Role.USER, Role.ASSISTANT]
    assert child[-1].content == "child result after restart"
    assert [m.content for m in parent if m.role is Role.TOOL] == ["child result after restart"]
    assert calls["child"] == 2


async def test_a_session_message_committed_before_a_sigkill_is_delivered_once(
    home: Path, llm: FakeOpenAI
) -> None:
    waiting = asyncio.Event()
    never = asyncio.Event()
    state = {"restarted": False}

    async def respond(body: dict[str, Any]) -> Reply | None:
        after_tool = any(m["role"] == "tool" for m in body["messages"])
        if after_tool and not state["restarted"]:
            waiting.set()
            await never.wait()  # killed meanwhile
        return None

    llm.responder = respond
    llm.add_tool_call(
        "send_session_message", {"text": "dinner at 7", "channel": "telegram", "chat_id": "777"}
    )
    llm.add_text("done")
    async with FakeTelegram() as tg:
        tg.start_outage("sendMessage")  # committed, not yet delivered
        config = _config(llm, channels={"telegram": tg.settings()})
        config["gateway"]["admins"] = ["websocket:boss"]
        env = child_env(home)
        try:
            gw = await spawn_gateway(config, home, env)
            await _ask(gw, "boss", "m1", "tell 777")
            await asyncio.wait_for(waiting.wait(), 20)
            await tg.wait_for(lambda: bool(tg.refused("sendMessage")), timeout=20)
            await _kill(gw)
            tg.end_outage("sendMessage")
            state["restarted"] = True
            gw2 = await spawn_gateway(config, home, env)
            try:
                reply = await _reply(gw2, "boss")
                await tg.wait_for(lambda: "dinner at 7" in tg.sent_texts, timeout=20)
            finally:
                assert await gw2.stop() == 0
        finally:
            never.set()
        delivered = [
            c
            for c in tg.calls_of("sendMessage")
            if c.params.get("text") == "dinner at 7" and c.error_code is None
        ]
    assert reply["text"] == "done"
    assert len(delivered) == 1
    async with Database(home / "storage" / "sessions.db") as db:
        target = await Store(db).transcripts.session_messages("telegram:777")
        parent = await Store(db).transcripts.session_messages("boss")
        outbox = await _outbox(db, "777")
    assert [(m.role, m.content, m.marker) for m in target] == [
        (Role.ASSISTANT, "dinner at 7", "session_message")
    ]
    assert outbox == [("dinner at 7", "sent")]
    # its result was stored before the kill; the resumed turn did not call it again
    assert [m.content for m in parent if m.role is Role.TOOL] == ["Sent to telegram:777."]
