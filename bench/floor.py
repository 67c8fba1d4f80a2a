"""The bare LLM-call floor: the request the gateway sent, POSTed again with
plain aiohttp and its answer (SSE or JSON) parsed, against the same fake LLM
process. The difference between the gateway's CPU per message and this plus
the bare WebSocket's is what the gateway itself adds per message."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp


async def _call(http: aiohttp.ClientSession, url: str, body: bytes, stream: bool) -> str:
    headers = {"Authorization": "Bearer bench", "Content-Type": "application/json"}
    async with http.post(url, data=body, headers=headers) as response:
        if not stream:
            answer = await response.json()
            return str(answer["choices"][0]["message"]["content"])
        text = []
        async for raw in response.content:
            line = raw.strip()
            if not line.startswith(b"data:") or line == b"data: [DONE]":
                continue
            chunk = json.loads(line[5:])
            for choice in chunk.get("choices", ()):
                text.append(choice.get("delta", {}).get("content") or "")
        return "".join(text)


async def per_call(
    call: Callable[[], Awaitable[object]], calls: int, clients: int
) -> dict[str, Any]:
    """`calls` runs of `call`, `clients` at a time, after one to warm up:
    this process's CPU ms per call."""
    await call()  # warm: connection pool, imports
    per = max(1, calls // clients)

    async def client() -> None:
        for _ in range(per):
            await call()

    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    done = per * clients
    return {
        "calls": done,
        "cpu_ms_per_call": round(cpu * 1000 / done, 3),
        "calls_per_sec": round(done / wall, 1),
    }


async def run(base_url: str, body: dict[str, Any], clients: int, calls: int) -> dict[str, Any]:
    """`calls` calls over `clients` concurrent connections; CPU ms per call."""
    url = f"{base_url}/chat/completions"
    data = json.dumps(body).encode()
    stream = bool(body.get("stream"))
    async with aiohttp.ClientSession() as http:
        measured = await per_call(lambda: _call(http, url, data, stream), calls, clients)
    return {"request_bytes": len(data), "stream": stream, **measured}
