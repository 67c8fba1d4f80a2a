"""A provider built when first needed, its SDK imported off the event loop.

Importing an LLM SDK is the longest step of start-up (the `openai` package
defines hundreds of pydantic models on import). The composition root hands
out `DeferredProvider`s and warms them once the gateway is ready: the import
runs in a worker thread, so /ready answers without waiting for it, and a turn
that comes first waits for the same import instead of starting another.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Callable

from agent.providers.base import DeltaSink, LLMProvider, LLMRequest, LLMResponse

__all__ = ["DeferredProvider"]


class DeferredProvider:
    def __init__(self, name: str, module: str, build: Callable[[], LLMProvider]) -> None:
        """`module`: what `build` imports (the SDK with it), imported first in a thread."""
        self.name = name
        self._module = module
        self._build = build
        self._real: LLMProvider | None = None
        self._lock = asyncio.Lock()
        self._closed = False

    async def warm(self) -> None:
        await self._provider()

    async def _provider(self) -> LLMProvider:
        if self._real is None:
            async with self._lock:
                if self._real is None:
                    await asyncio.to_thread(importlib.import_module, self._module)
                    self._real = self._build()
        return self._real

    async def complete(self, request: LLMRequest, on_delta: DeltaSink | None = None) -> LLMResponse:
        provider = await self._provider()
        return await provider.complete(request, on_delta)

    async def aclose(self) -> None:
        if self._real is not None:
            await self._real.aclose()
