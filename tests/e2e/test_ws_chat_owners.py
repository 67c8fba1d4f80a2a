"""Principals own WebSocket chats (issue 51, item 2). Through a real
`picobot gateway` process: another token's `hello` for a chat id is refused
and gets nothing of the chat — no history, no live frame, no parked reply —
and nothing is marked delivered to it; the owner then gets the reply once.
In process: racing hellos for a new id, and chats from before owners."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pytest
import websockets

from channels.websocket import CLOSE_FORBIDDEN_CHAT
from gateway.app import Gateway
from gateway.config.loading import LoadedConfig
from tests.fakes.openai_server import FakeOpenAI
from tests.support import (
    GatewayProcess,
    child_env,
    make_config,
    running_gateway,
    spawn_gateway,
    wait_until,
    ws_client,
)

pytestmark = pytest.mark.slow

TOKENS = {"alice": "token-for-alice-0123", "bob": "token-for-bob-4567"}
SECRET = "alice's plan: the surprise party is on friday"


def _config(llm: FakeOpenAI) -> dict[str, Any]:
    return {
        "providers": {
            "default": {"base_url": llm.base_url, "api_key": "test-key", "max_retries": 0}
        },
        "models": {"default": {"model_id": "fake-model"}},
        "gateway": {"port": 0, "shutdown_timeout_secs": 10, "auth_token": "operator-token-89ab"},
        # bob may use the bot: what keeps him out of alice's chat is not allow_from
        "channels": {"websocket": {"tokens": TOKENS, "allow_from": ["alice", "bob"]}},
        "logging": {"format": "json"},
    }


async def _hello(gw: GatewayProcess, chat_id: str, token: str) -> websockets.ClientConnection:
    ws = await websockets.connect(gw.ws_url)
    await ws.send(json.dumps({"type": "hello", "protocol": 1, "chat_id": chat_id, "token": token}))
    return ws


async def _frames_until_closed(ws: websockets.ClientConnection) -> tuple[list[Any], int | None]:
    frames = []
    try:
        while True:
            frames.append(json.loads(await asyncio.wait_for(ws.recv(), 10)))
    except websockets.ConnectionClosed as closed:
        return frames, closed.rcvd.code if closed.rcvd else None


async def _next(ws: websockets.ClientConnection, kind: str) -> dict[str, Any]:
    async with asyncio.timeout(10):
        while True:
            frame: dict[str, Any] = json.loads(await ws.recv())
            if frame["type"] == kind:
                return frame


def _outbox_states(db_path: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True) as conn:
        return conn.execute("SELECT chat_id, state FROM outbox ORDER BY id").fetchall()


async def test_another_token_naming_alices_chat_gets_nothing_and_alice_her_reply_once(
    home: Path, llm: FakeOpenAI
) -> None:
    chat = f"web-{uuid.uuid4().hex}"
    db_path = home / "storage" / "sessions.db"
    llm.hold()
    gw = await spawn_gateway(_config(llm), home, child_env(home))
    try:
        # alice asks, and leaves before the reply is written: it is parked
        alice = await _hello(gw, chat, TOKENS["alice"])
        assert (await _next(alice, "welcome"))["chat_id"] == chat
        await alice.send(json.dumps({"type": "message", "id": "m1", "text": SECRET}))
        assert (await _next(alice, "ack"))["status"] == "accepted"
        await llm.wait_requests(1, timeout=20)
        await alice.close()
        llm.release()
        await gw.wait_event("outbound_parked", timeout=20)

        # bob names her chat: an error frame, closed, nothing of hers
        bob = await _hello(gw, chat, TOKENS["bob"])
        first = json.loads(await asyncio.wait_for(bob.recv(), 10))
        assert (first["type"], first.get("code")) == ("error", "forbidden_chat"), first
        frames, code = await _frames_until_closed(bob)
        assert (frames, code) == ([], CLOSE_FORBIDDEN_CHAT)
        assert await asyncio.to_thread(_outbox_states, db_path) == [(chat, "parked")]

        # in his own chat bob's queries read his chat only, never hers
        own = await _hello(gw, "bob-own-chat", TOKENS["bob"])
        await _next(own, "welcome")
        await own.send(json.dumps({"type": "history", "id": "q1", "session_id": chat}))
        refused = await _next(own, "error")
        assert (refused["id"], refused["code"]) == ("q1", "not_found")
        await own.send(json.dumps({"type": "sessions", "id": "q2"}))
        assert (await _next(own, "sessions"))["sessions"] == []
        await own.send(json.dumps({"type": "history", "id": "q3"}))
        assert (await _next(own, "history"))["messages"] == []
        await own.close()

        # alice comes back: her parked reply, once
        alice = await _hello(gw, chat, TOKENS["alice"])
        await _next(alice, "welcome")
        reply = await _next(alice, "message")
        assert (reply["reply_to"], reply["text"]) == ("m1", f"echo: {SECRET}")
        assert reply["earlier"] is True  # written while she was away

        async def sent() -> bool:  # another process's state: looked at, not awaited
            return await asyncio.to_thread(_outbox_states, db_path) == [(chat, "sent")]

        await wait_until(sent)
        await alice.send(json.dumps({"type": "history", "id": "q4"}))
        later = []
        while (frame := json.loads(await asyncio.wait_for(alice.recv(), 10)))["type"] != "history":
            later.append(frame)
        assert [f for f in later if f["type"] == "message"] == []  # no second copy
        assert [m["text"] for m in frame["messages"]] == [SECRET, f"echo: {SECRET}"]
        await alice.close()
    finally:
        assert await gw.stop() == 0
    assert await asyncio.to_thread(_outbox_states, db_path) == [(chat, "sent")]
    refusals = gw.events("ws_chat_forbidden")
    assert [r["principal"] for r in refusals] == ["token:bob"]
    assert chat not in json.dumps(refusals)


def _named_tokens(home: Path, llm: FakeOpenAI) -> LoadedConfig:
    return make_config(
        home,
        llm.base_url,
        gateway={"auth_token": "operator-token-89ab"},
        channels={"websocket": {"tokens": TOKENS}},
    )


async def _first_frame(gw: Gateway, chat_id: str, token: str) -> dict[str, Any]:
    async with websockets.connect(f"ws://127.0.0.1:{gw.port}/ws") as ws:
        await ws.send(json.dumps({"type": "hello", "chat_id": chat_id, "token": token}))
        frame: dict[str, Any] = json.loads(await asyncio.wait_for(ws.recv(), 10))
        return frame


async def test_of_two_tokens_racing_for_a_new_chat_id_one_gets_it(
    home: Path, llm: FakeOpenAI
) -> None:
    async with running_gateway(_named_tokens(home, llm)) as gw:
        for n in range(10):
            chat = f"race-{n}"
            frames = await asyncio.gather(
                _first_frame(gw, chat, TOKENS["alice"]), _first_frame(gw, chat, TOKENS["bob"])
            )
            kinds = sorted(f.get("code", f["type"]) for f in frames)
            assert kinds == ["forbidden_chat", "welcome"], frames


async def test_a_chat_from_before_owners_is_its_only_senders(home: Path, llm: FakeOpenAI) -> None:
    """After the upgrade (no owner rows), a chat only alice wrote in is hers,
    one that the operator's connection used is the operator's."""
    async with running_gateway(_named_tokens(home, llm)) as gw:
        async with ws_client(gw, "alices-old-chat", token=TOKENS["alice"]) as alice:
            assert await alice.ask("hi") == "echo: hi"
        async with ws_client(gw, "operators-old-chat", token="operator-token-89ab") as op:
            assert await op.ask("hello") == "echo: hello"
        assert gw.store is not None
        await gw.store.db.write(lambda c: c.execute("DELETE FROM chat_owners"))  # as before v14

        assert (await _first_frame(gw, "alices-old-chat", TOKENS["bob"]))["code"] == (
            "forbidden_chat"
        )
        assert (await _first_frame(gw, "alices-old-chat", TOKENS["alice"]))["type"] == "welcome"
        assert (await _first_frame(gw, "operators-old-chat", TOKENS["alice"]))["code"] == (
            "forbidden_chat"
        )
        welcome = await _first_frame(gw, "operators-old-chat", "operator-token-89ab")
        assert welcome["type"] == "welcome"
