"""The machine's ceiling for scenario (b): a bare aiohttp WebSocket server that
answers each message frame with one reply frame (no storage, no agent), driven
by the same load generator. The gap between it and the gateway is the
gateway's own cost; the ceiling itself says what this machine can do at all."""

from __future__ import annotations

import json
import time
from typing import Any

from aiohttp import WSMsgType, web

from bench.harness import run_load


async def _echo(request: web.Request) -> web.WebSocketResponse:
    ws = web.WebSocketResponse()
    await ws.prepare(request)
    async for msg in ws:
        if msg.type is not WSMsgType.TEXT:
            continue
        frame = json.loads(msg.data)
        if frame["type"] == "hello":
            await ws.send_str(json.dumps({"type": "welcome", "chat_id": frame["chat_id"]}))
        elif frame["type"] == "message":
            reply = {"type": "message", "reply_to": frame["id"], "text": "ok"}
            await ws.send_str(json.dumps(reply))
    return ws


async def run(clients: int, seconds: float) -> dict[str, Any]:
    app = web.Application()
    app.router.add_get("/ws", _echo)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        cpu_before = time.process_time()
        load = await run_load(f"ws://127.0.0.1:{port}/ws", clients, seconds)
        cpu = time.process_time() - cpu_before
    finally:
        await runner.cleanup()
    return {
        "messages_per_sec": round(load["messages"] / load["seconds"], 1),
        "p50_ms": load["p50_ms"],
        "p99_ms": load["p99_ms"],
        "server_cpu_ms_per_message": round(cpu * 1000 / max(1, load["answered_in_all"]), 3),
    }
