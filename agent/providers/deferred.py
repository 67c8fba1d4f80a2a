"""A provider built when first needed, off the event loop.

Importing an LLM SDK is the longest step of start-up (the `openai` package
defines hundreds of pydantic models on import), and building its client
loads the system's CA bundle (tens of milliseconds). The composition root
hands out `DeferredProvider`s and warms them once the gateway is ready: the
import and the build run in a worker thread, so /ready answers without
waiting for them and no chat waits on the loop meanwhile; a turn that comes
first waits for the same build instead of starting another.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Callable

from agent.providers.base import DeltaSink, LLMProvider, LLMRequest, LLMResponse, ProviderError

__all__ = ["DeferredProvider"]


class DeferredProvider:
    def __init__(self, name: str, module: str, build: Callable[[], LLMProvider]) -> None:
        """`module`: what `build` imports (the SDK with it), imported first.
        `build` runs in a worker thread: it must not need a running loop."""
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
                    self._check_open()
                    real = await asyncio.to_thread(self._import_and_build)
                    try:
                        self._check_open()  # closed while it was being built
                    except ProviderError:
                        await real.aclose()
                        raise
                    self._real = real
        return self._real

    def _check_open(self) -> None:
        if self._closed:
            raise ProviderError(f"provider '{self.name}' is closed")

    def _import_and_build(self) -> LLMProvider:
        importlib.import_module(self._module)
        return self._build()

    async def complete(self, request: LLMRequest, on_delta: DeltaSink | None = None) -> LLMResponse:
        provider = await self._provider()
        return await provider.complete(request, on_delta)

    async def aclose(self) -> None:
        self._closed = True
        if self._real is not None:
            await self._real.aclose()
