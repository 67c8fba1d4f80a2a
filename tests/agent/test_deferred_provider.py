"""DeferredProvider: built once, on first use or warm-up, whichever comes first."""

from __future__ import annotations

import asyncio

import pytest

from agent.messages import ChatMessage
from agent.providers import deferred_provider
from agent.providers.base import (
    DeltaSink,
    LLMProvider,
    LLMRequest,
    LLMResponse,
    ProviderConfigError,
    ProviderSettings,
)
from agent.providers.deferred import DeferredProvider


class Echo:
    name = "echo"

    def __init__(self) -> None:
        self.closed = False

    async def complete(self, request: LLMRequest, on_delta: DeltaSink | None = None) -> LLMResponse:
        return LLMResponse(content=request.messages[-1].content)

    async def aclose(self) -> None:
        self.closed = True


async def test_a_call_and_a_warm_up_together_build_it_once() -> None:
    built: list[Echo] = []

    def build() -> LLMProvider:
        built.append(Echo())
        return built[-1]

    provider = DeferredProvider("echo", "json", build)
    request = LLMRequest("m", [ChatMessage.user("hi")])
    answer, _ = await asyncio.gather(provider.complete(request), provider.warm())
    assert answer.content == "hi"
    await provider.warm()
    assert len(built) == 1
    await provider.aclose()
    assert built[0].closed


async def test_closing_one_never_used_builds_nothing() -> None:
    built: list[Echo] = []
    provider = DeferredProvider("echo", "json", lambda: built.append(Echo()) or built[-1])
    await provider.aclose()
    assert built == []


def test_an_unknown_kind_is_refused_at_once() -> None:
    with pytest.raises(ProviderConfigError, match="unknown type"):
        deferred_provider("nope", ProviderSettings("p", "key"))
