"""Scenario (a): N chats send one message each at once; the LLM (a fake HTTP
server behind the real OpenAI SDK) takes a fixed latency. Wall time until the
last reply shows whether chats really run concurrently. The fake LLM and the
clients run in their own processes; the gateway gets the event loop to itself."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from bench.harness import gateway, run_load


async def run(chats: int = 200, llm_latency: float = 1.0) -> dict[str, Any]:
    fake = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.fake_llm",
        str(llm_latency),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert fake.stdout is not None
    assert fake.stdin is not None
    base_url = (await asyncio.wait_for(fake.stdout.readline(), 30)).decode().strip()
    try:
        async with gateway(base_url, max_concurrent_runs=chats) as gw:
            result = await run_load(f"ws://127.0.0.1:{gw.port}/ws", chats, "fanout")
    finally:
        fake.stdin.close()
        await fake.wait()
    return {
        "scenario": "fanout",
        "chats": chats,
        "llm_latency_secs": llm_latency,
        "max_concurrent_runs": chats,
        **result,
        "target_wall_secs": 2.0,
    }
