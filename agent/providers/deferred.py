"""A provider built when first needed, off the event loop.

Importing an LLM SDK is the longest step of start-up (the `openai` package
defines hundreds of pydantic models on import), and building its client
loads the system's CA bundle (tens of milliseconds). The composition root
hands out `DeferredProvider`s, built at their first call: the import and
the build run in a worker thread, so start-up never waits for them and the
event loop is not blocked meanwhile; a turn that comes while one runs waits
for the same build instead of starting another. An SDK a gateway never calls
(a fallback provider, a model no agent uses) is never imported.
"""

from __future__ import annotations

import asyncio
import importlib
import time
from collections.abc import Callable
from typing import Final

import structlog

from agent.providers.base import DeltaSink, LLMProvider, LLMRequest, LLMResponse, ProviderError

__all__ = ["CLOSE_WAIT_SECS", "DeferredProvider"]

log = structlog.get_logger(__name__)

# How long closing waits for a build still running (an import stuck on a slow
# disk, say): shutdown must not hang on it. What it builds later is not used.
CLOSE_WAIT_SECS: Final = 5.0


class DeferredProvider:
    def __init__(
        self,
        name: str,
        module: str,
        build: Callable[[], LLMProvider],
        *,
        close_wait_secs: float = CLOSE_WAIT_SECS,
    ) -> None:
        """`module`: what `build` imports (the SDK with it), imported first.
        `build` runs in a worker thread: it must not need a running loop."""
        self.name = name
        self._close_wait_secs = close_wait_secs
        self._module = module
        self._build = build
        self._real: LLMProvider | None = None
        # The build in progress, shared: a caller cancelled while it runs
        # leaves it to the next caller (or to aclose), never to a second build.
        self._building: asyncio.Future[LLMProvider] | None = None
        self._closed = False
        self._abandoned = False  # aclose stopped waiting for the build
        self._on_built: list[Callable[[], None]] = []

    def when_built(self, callback: Callable[[], None]) -> None:
        """Call `callback` on the event loop once the provider is built."""
        self._on_built.append(callback)

    async def _provider(self) -> LLMProvider:
        self._check_open()
        if self._real is None:
            if self._building is None:
                loop = asyncio.get_running_loop()
                self._building = loop.run_in_executor(None, self._import_and_build)
            building = self._building
            try:
                real = await asyncio.shield(building)
            except Exception:
                if self._building is building:  # failed: the next call tries again
                    self._building = None
                raise
            if self._closed and self._abandoned:  # built after aclose gave up on it
                self._abandoned = False  # closed here, once
                await real.aclose()
            self._check_open()  # closed while it was being built: aclose closes it
            if self._real is None:
                self._real = real
                for callback in self._on_built:
                    callback()
        return self._real

    def _check_open(self) -> None:
        if self._closed:
            raise ProviderError(f"provider '{self.name}' is closed")

    def _import_and_build(self) -> LLMProvider:
        started = time.monotonic()
        importlib.import_module(self._module)
        built = self._build()
        log.info("provider_loaded", provider=self.name, secs=round(time.monotonic() - started, 3))
        return built

    async def complete(self, request: LLMRequest, on_delta: DeltaSink | None = None) -> LLMResponse:
        provider = await self._provider()
        return await provider.complete(request, on_delta)

    async def aclose(self) -> None:
        """Also waits for a build in progress, to close what it built, for at
        most `close_wait_secs`."""
        self._closed = True
        if self._real is None and self._building is not None:
            try:
                async with asyncio.timeout(self._close_wait_secs):
                    self._real = await asyncio.shield(self._building)
            except TimeoutError:  # a caller still waiting for it closes it
                self._abandoned = True
                log.warning(
                    "provider_build_abandoned",
                    provider=self.name,
                    waited_secs=self._close_wait_secs,
                )
            except Exception:  # nothing built: its caller saw why
                pass
        if self._real is not None:
            await self._real.aclose()
