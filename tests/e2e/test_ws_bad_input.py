"""Bad WebSocket input gets an error frame or a documented close; the gateway stays healthy."""

from __future__ import annotations

import json
from pathlib import Path

import aiohttp
import pytest
import websockets

from channels.websocket import CLOSE_UNAUTHORIZED
from gateway.app import Gateway
from tests.fakes.openai_server import FakeOpenAI
from tests.support import make_config, running_gateway, ws_client


async def _health(gw: Gateway) -> int:
    async with aiohttp.ClientSession() as http, http.get(f"{gw.base_url}/health") as resp:
        return resp.status


async def test_bad_frames_get_error_frames_and_connection_stays(
    home: Path, llm: FakeOpenAI
) -> None:
    async with running_gateway(make_config(home, llm.base_url)) as gw, ws_client(gw) as client:
        await client.ws.send("this is not json")
        frame = await client.recv()
        assert (frame["type"], frame["code"]) == ("error", "bad_json")

        await client.ws.send(json.dumps({"type": "teleport", "id": "x1"}))
        frame = await client.recv()
        assert (frame["type"], frame["code"], frame["id"]) == ("error", "unknown_type", "x1")

        await client.ws.send(json.dumps(["a", "list"]))
        assert (await client.recv())["code"] == "bad_frame"

        await client.ws.send(json.dumps({"type": "message", "id": "ok-1"}))  # no text
        assert (await client.recv())["code"] == "bad_frame"

        await client.ws.send(json.dumps({"type": "ping", "id": "p1"}))
        assert await client.recv() == {"type": "pong", "id": "p1"}

        # still a working conversation after all of that
        assert await client.ask("hello") == "echo: hello"
        assert await _health(gw) == 200


async def test_oversize_frame_is_refused_with_1009(home: Path, llm: FakeOpenAI) -> None:
    loaded = make_config(home, llm.base_url, channels={"websocket": {"max_frame_bytes": 4096}})
    async with running_gateway(loaded) as gw:
        async with ws_client(gw) as client:
            big = json.dumps({"type": "message", "id": "big", "text": "x" * 10_000})
            await client.ws.send(big)
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await client.recv()
            assert closed.value.rcvd is not None
            assert closed.value.rcvd.code == 1009
        assert await _health(gw) == 200
        assert llm.requests == []


async def test_wrong_token_is_refused(home: Path, llm: FakeOpenAI) -> None:
    loaded = make_config(home, llm.base_url, gateway={"auth_token": "s3cret-token"})
    async with running_gateway(loaded) as gw:
        async with websockets.connect(f"ws://127.0.0.1:{gw.port}/ws") as ws:
            await ws.send(json.dumps({"type": "hello", "chat_id": "c", "token": "wrong"}))
            frame = json.loads(await ws.recv())
            assert (frame["type"], frame["code"]) == ("error", "unauthorized")
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await ws.recv()
            assert closed.value.rcvd is not None
            assert closed.value.rcvd.code == CLOSE_UNAUTHORIZED
        # the right token works
        async with ws_client(gw, token="s3cret-token") as client:
            assert await client.ask("hi") == "echo: hi"
        assert await _health(gw) == 200


async def test_first_frame_must_be_hello(home: Path, llm: FakeOpenAI) -> None:
    async with running_gateway(make_config(home, llm.base_url)) as gw:
        async with websockets.connect(f"ws://127.0.0.1:{gw.port}/ws") as ws:
            await ws.send(json.dumps({"type": "message", "id": "a", "text": "hi"}))
            frame = json.loads(await ws.recv())
            assert frame["code"] == "hello_required"
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await ws.recv()
            assert closed.value.rcvd is not None
            assert closed.value.rcvd.code == 1008
        assert await _health(gw) == 200
