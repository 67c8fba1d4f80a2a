"""send_session_message's limit across a restart of a real `picobot gateway`
process: six notes in one run, the seventh in the next run of the same minute
is refused (the count is stored, not kept in the process)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import websockets

from storage.sqlite.db import Database
from tests.fakes.openai_server import FakeOpenAI
from tests.support import GatewayProcess, child_env, process_config, spawn_gateway

pytestmark = pytest.mark.slow


def _config(llm: FakeOpenAI) -> dict[str, Any]:
    return process_config(llm.base_url)


async def _converse(gw: GatewayProcess, chat_id: str, msg_id: str, text: str, final: str) -> int:
    """Send `text`; read message frames until the reply `final`; how many came before it."""
    async with websockets.connect(gw.ws_url) as ws:
        await ws.send(json.dumps({"type": "hello", "chat_id": chat_id}))
        assert json.loads(await ws.recv())["type"] == "welcome"
        await ws.send(json.dumps({"type": "message", "id": msg_id, "text": text}))
        before = 0
        async with asyncio.timeout(20):
            while True:
                frame = json.loads(await ws.recv())
                if frame["type"] != "message":
                    continue
                if frame["text"] == final:
                    return before
                before += 1


async def test_the_seventh_session_message_after_a_restart_is_refused(
    home: Path, llm: FakeOpenAI
) -> None:
    for n in range(6):
        llm.add_tool_call("send_session_message", {"text": f"note {n}"})
    llm.add_text("six sent")
    llm.add_tool_call("send_session_message", {"text": "one more"})
    llm.add_text("after restart")
    config, env = _config(llm), child_env(home)
    gw = await spawn_gateway(config, home, env)
    try:
        assert await _converse(gw, "loud", "m1", "spam me", "six sent") == 6
    finally:
        assert await gw.stop() == 0
    gw = await spawn_gateway(config, home, env)
    try:
        assert await _converse(gw, "loud", "m2", "and one more", "after restart") == 0
    finally:
        assert await gw.stop() == 0
    [refused] = [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "tool"][-1:]
    assert refused.startswith("Error: rate limit: at most 6 session messages per minute")
    async with Database(home / "storage" / "sessions.db") as db:
        rows = await db.read(
            lambda c: c.execute("SELECT text FROM outbox WHERE chat_id = 'loud'").fetchall()
        )
    assert sorted(r[0] for r in rows) == sorted(
        [f"note {n}" for n in range(6)] + ["six sent", "after restart"]
    )
