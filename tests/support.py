"""Helpers for end-to-end tests: a config on a temporary PICOBOT_HOME and the
real composition root running in-process on 127.0.0.1 port 0."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import websockets

from channels.base import Channel
from gateway.app import Gateway
from gateway.config import LoadedConfig, parse_config


def deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def make_config(home: Path, llm_base_url: str, **sections: Any) -> LoadedConfig:
    """A complete config: WebSocket channel on 127.0.0.1 port 0, the default
    provider pointed at a fake LLM, storage and workspace under `home`."""
    raw: dict[str, Any] = {
        "providers": {
            "default": {
                "type": "openai",
                "base_url": llm_base_url,
                "api_key": "test-key",
                "max_retries": 0,
            }
        },
        "models": {"default": {"model_id": "fake-model"}},
        "gateway": {"host": "127.0.0.1", "port": 0, "shutdown_timeout_secs": 5},
    }
    raw = deep_merge(raw, sections)
    config, missing = parse_config(raw, {}, source="test config")
    return LoadedConfig(config, None, home, missing)


@asynccontextmanager
async def running_gateway(
    loaded: LoadedConfig, *, extra_channels: Sequence[Channel] = ()
) -> AsyncIterator[Gateway]:
    gateway = Gateway(loaded, extra_channels=extra_channels)
    task = asyncio.create_task(gateway.run(), name="test-gateway")
    started = asyncio.create_task(gateway.started.wait())
    done, _ = await asyncio.wait({task, started}, timeout=15, return_when=asyncio.FIRST_COMPLETED)
    if task in done:
        started.cancel()
        task.result()  # raises the start-up error
    if started not in done:
        started.cancel()
        task.cancel()
        raise TimeoutError("gateway did not start")
    try:
        yield gateway
    finally:
        gateway.request_stop()
        await asyncio.wait_for(task, 20)


class WsClient:
    """A protocol-level WebSocket client for tests (docs/PROTOCOL.md)."""

    def __init__(self, ws: websockets.ClientConnection, chat_id: str) -> None:
        self.ws = ws
        self.chat_id = chat_id
        self._n = 0

    async def send(self, text: str, msg_id: str | None = None) -> str:
        self._n += 1
        msg_id = msg_id or f"m{self._n}"
        await self.ws.send(json.dumps({"type": "message", "id": msg_id, "text": text}))
        return msg_id

    async def recv(self, timeout: float = 10.0) -> dict[str, Any]:
        raw = await asyncio.wait_for(self.ws.recv(), timeout)
        frame: dict[str, Any] = json.loads(raw)
        return frame

    async def recv_type(self, kind: str, timeout: float = 10.0) -> dict[str, Any]:
        """Frames of other types until one of `kind` arrives."""
        async with asyncio.timeout(timeout):
            while True:
                frame = await self.recv(timeout)
                if frame["type"] == kind:
                    return frame

    async def ask(self, text: str, timeout: float = 10.0) -> str:
        """Send a message and return the text of the reply to it."""
        msg_id = await self.send(text)
        async with asyncio.timeout(timeout):
            while True:
                frame = await self.recv(timeout)
                if frame["type"] == "message" and frame.get("reply_to") == msg_id:
                    return str(frame["text"])
                if frame["type"] == "error":
                    raise AssertionError(f"error frame: {frame}")


@asynccontextmanager
async def ws_client(
    gateway: Gateway, chat_id: str = "chat-1", token: str | None = None
) -> AsyncIterator[WsClient]:
    url = f"ws://127.0.0.1:{gateway.port}/ws"
    async with websockets.connect(url) as ws:
        hello: dict[str, Any] = {"type": "hello", "protocol": 1, "chat_id": chat_id}
        if token is not None:
            hello["token"] = token
        await ws.send(json.dumps(hello))
        welcome = json.loads(await asyncio.wait_for(ws.recv(), 5))
        assert welcome["type"] == "welcome", welcome
        yield WsClient(ws, chat_id)
