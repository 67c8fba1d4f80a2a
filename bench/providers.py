"""Each provider class alone, on its SDK's client, against its fake service
in its own process (bench.fake_llm): streamed calls of a short chat, 8 at a
time; CPU ms per call of this process. Beside them, in the same run, the
bare floor (bench.floor: the OpenAI provider's own request POSTed with plain
aiohttp and its SSE parsed). A provider far above the floor pays for SDK
machinery on every turn (the typed Anthropic stream cost ≈ 4 × the floor)."""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path
from typing import Any

from agent.messages import ChatMessage
from agent.providers import create_provider
from agent.providers.base import LLMRequest, ProviderSettings
from bench import floor
from bench.process import fake_llm

_REQUEST = LLMRequest(
    model="bench-model",
    messages=(ChatMessage.system("You are a helpful assistant. " * 40), ChatMessage.user("hello")),
)


async def _discard(_: str) -> None:
    pass


async def run(calls: int = 2_000, clients: int = 8) -> dict[str, Any]:
    out: dict[str, Any] = {"scenario": "providers", "concurrent_calls": clients}
    with tempfile.TemporaryDirectory(prefix="picobot-bench-") as tmp:
        for kind in ("openai", "anthropic"):
            async with fake_llm(0.0, Path(tmp), record=1, kind=kind) as llm:
                settings = ProviderSettings(name=kind, api_key="bench", base_url=llm.base_url)
                provider = create_provider(kind, settings)
                try:
                    out[kind] = await floor.per_call(
                        functools.partial(provider.complete, _REQUEST, _discard), calls, clients
                    )
                finally:
                    await provider.aclose()
                if kind == "openai":  # the same request, bare
                    hello = llm.recorded()[0]["body"]
                    out["bare_llm_call"] = await floor.run(llm.base_url, hello, clients, calls)
    return out
