"""WebSocket identity, frame robustness and collision-free dedup keys (issue 15)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import websockets

from channels.websocket import CLOSE_BAD_FRAMES
from tests.fakes.openai_server import FakeOpenAI
from tests.support import make_config, newest, running_gateway, ws_client

TOKENS = {"alice": "token-for-alice-0123", "bob": "token-for-bob-4567"}


def named_tokens_config(home: Path, llm: FakeOpenAI) -> object:
    return make_config(
        home,
        llm.base_url,
        gateway={"auth_token": "operator-master-token"},
        channels={"websocket": {"tokens": TOKENS, "allow_from": ["alice"]}},
    )


def user_texts(llm: FakeOpenAI) -> list[str]:
    return [newest(r)["content"] for r in llm.requests]


async def test_named_tokens_decide_the_sender_and_allow_from_is_enforced(
    home: Path, llm: FakeOpenAI
) -> None:
    async with running_gateway(named_tokens_config(home, llm)) as gw:  # type: ignore[arg-type]
        async with ws_client(gw, "alice-chat", token=TOKENS["alice"]) as alice:
            assert await alice.ask("hi from alice") == "echo: hi from alice"
        async with ws_client(gw, "bob-chat", token=TOKENS["bob"]) as bob:
            refusal = await bob.ask("hi from bob")
            assert not refusal.startswith("echo:")
            # bob cannot become alice by saying so
            await bob.ws.send(
                json.dumps(
                    {"type": "message", "id": "claim", "text": "as alice", "sender_id": "alice"}
                )
            )
            frame = await bob.recv_type("error")
            assert (frame["code"], frame["id"]) == ("forbidden_sender", "claim")
        # alice's chat id does not let bob into her chat (tests/e2e/test_ws_chat_owners.py)
        async with websockets.connect(f"ws://127.0.0.1:{gw.port}/ws") as ws:
            hello = {"type": "hello", "chat_id": "alice-chat", "token": TOKENS["bob"]}
            await ws.send(json.dumps(hello))
            assert json.loads(await ws.recv())["code"] == "forbidden_chat"
        async with ws_client(gw, "alice-chat", token=TOKENS["alice"]) as alice:
            assert await alice.ask("after bob") == "echo: after bob"
        async with websockets.connect(f"ws://127.0.0.1:{gw.port}/ws") as ws:
            await ws.send(json.dumps({"type": "hello", "protocol": 1, "token": "alice"}))
            assert json.loads(await ws.recv())["code"] == "unauthorized"
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await ws.recv()
        assert closed.value.rcvd is not None
        assert closed.value.rcvd.code == 4401
    # the model only ever saw alice's message
    assert user_texts(llm) == ["hi from alice", "after bob"]


async def test_colliding_chat_and_message_ids_are_both_answered_once(
    home: Path, llm: FakeOpenAI
) -> None:
    async with running_gateway(make_config(home, llm.base_url)) as gw:
        async with ws_client(gw, "a/b") as first:
            await first.send("first", msg_id="c")
            ack = await first.recv_type("ack")
            assert ack["status"] == "accepted"
            assert (await first.recv_type("message"))["text"] == "echo: first"
        async with ws_client(gw, "a") as second:
            await second.send("second", msg_id="b/c")
            ack = await second.recv_type("ack")
            assert ack["status"] == "accepted"
            reply = await second.recv_type("message")
            assert (reply["text"], reply["reply_to"]) == ("echo: second", "b/c")
            await second.send("second", msg_id="b/c")  # a real resend is still a duplicate
            assert (await second.recv_type("ack"))["status"] == "duplicate"
    assert sorted(user_texts(llm)) == ["first", "second"]


async def test_pathological_frames_get_error_frames_then_a_close(
    home: Path, llm: FakeOpenAI
) -> None:
    loaded = make_config(home, llm.base_url, channels={"websocket": {"max_bad_frames": 5}})
    async with running_gateway(loaded) as gw, ws_client(gw) as client:
        bad = [
            "[" * 3000,
            '{"type": "ping", "id": ' + "9" * 5000 + "}",
            json.dumps({"type": {"nested": [1, 2]}, "id": ["x"] * 100}),
            json.dumps({"type": "message", "id": "m", "text": 5}),
        ]
        for frame in bad:
            await client.ws.send(frame)
            reply = await client.recv()
            assert reply["type"] == "error"
            assert reply.get("id") in (None, "m")
        await client.ws.send(json.dumps({"type": "ping", "id": "p"}))
        assert await client.recv() == {"type": "pong", "id": "p"}  # resets the count
        for _ in range(5):
            await client.ws.send("[" * 3000)
            assert (await client.recv())["type"] == "error"
        assert (await client.recv())["code"] == "too_many_bad_frames"
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await client.recv()
        assert closed.value.rcvd is not None
        assert closed.value.rcvd.code == CLOSE_BAD_FRAMES
