"""Each provider class alone, on its SDK's client, against its fake service
in its own process (bench.fake_llm): streamed calls of a short chat, 8 at a
time; CPU ms per call of this process. Beside them, in the same run, the
bare floor (bench.floor: the OpenAI provider's own request POSTed with plain
aiohttp and its SSE parsed). A provider far above the floor pays for SDK
machinery on every turn (the typed Anthropic stream cost ≈ 4 × the floor)."""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from agent.messages import ChatMessage
from agent.providers import create_provider
from agent.providers.base import LLMProvider, LLMRequest, ProviderSettings
from bench import floor
from bench.process import fake_llm

_REQUEST = LLMRequest(
    model="bench-model",
    messages=(ChatMessage.system("You are a helpful assistant. " * 40), ChatMessage.user("hello")),
)


async def _discard(_: str) -> None:
    pass


async def _cpu_per_call(provider: LLMProvider, calls: int, clients: int) -> dict[str, Any]:
    await provider.complete(_REQUEST, _discard)  # warm: connection pool
    per = max(1, calls // clients)

    async def client() -> None:
        for _ in range(per):
            await provider.complete(_REQUEST, _discard)

    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    done = per * clients
    return {
        "calls": done,
        "cpu_ms_per_call": round(cpu * 1000 / done, 3),
        "calls_per_sec": round(done / wall, 1),
    }


async def run(calls: int = 2_000, clients: int = 8) -> dict[str, Any]:
    out: dict[str, Any] = {"scenario": "providers", "concurrent_calls": clients}
    with tempfile.TemporaryDirectory(prefix="picobot-bench-") as tmp:
        for kind in ("openai", "anthropic"):
            async with fake_llm(0.0, Path(tmp), record=1, kind=kind) as llm:
                settings = ProviderSettings(name=kind, api_key="bench", base_url=llm.base_url)
                provider = create_provider(kind, settings)
                try:
                    out[kind] = await _cpu_per_call(provider, calls, clients)
                finally:
                    await provider.aclose()
                if kind == "openai":  # the same request, bare
                    hello = llm.recorded()[0]["body"]
                    out["bare_llm_call"] = await floor.run(llm.base_url, hello, clients, calls)
    return out
