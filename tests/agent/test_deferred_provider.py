"""DeferredProvider: built once, at its first call; calls meanwhile wait for that build."""

from __future__ import annotations

import asyncio
import threading

import pytest

from agent.messages import ChatMessage
from agent.providers import deferred_provider
from agent.providers.base import (
    DeltaSink,
    LLMProvider,
    LLMRequest,
    LLMResponse,
    ProviderConfigError,
    ProviderError,
    ProviderSettings,
)
from agent.providers.deferred import DeferredProvider

_HI = LLMRequest("m", [ChatMessage.user("hi")])


class Echo:
    name = "echo"

    def __init__(self) -> None:
        self.closed = False

    async def complete(self, request: LLMRequest, on_delta: DeltaSink | None = None) -> LLMResponse:
        return LLMResponse(content=request.messages[-1].content)

    async def aclose(self) -> None:
        self.closed = True


class GatedBuild:
    """A build that, in its thread, waits until the test releases it."""

    def __init__(self) -> None:
        self.built: list[Echo] = []
        self.building = threading.Event()
        self.release = threading.Event()

    def __call__(self) -> LLMProvider:
        self.building.set()
        self.release.wait(5)
        self.built.append(Echo())
        return self.built[-1]

    async def started(self) -> None:
        assert await asyncio.to_thread(self.building.wait, 5)


async def test_it_is_built_at_its_first_call_and_says_so_once() -> None:
    builds: list[Echo] = []
    told: list[str] = []

    def build() -> LLMProvider:
        builds.append(Echo())
        return builds[-1]

    provider = DeferredProvider("echo", "json", build)
    provider.when_built(lambda: told.append("built"))
    assert builds == []  # nothing until a call needs it
    assert told == []
    request = _HI
    assert (await provider.complete(request)).content == "hi"
    assert (await provider.complete(request)).content == "hi"
    assert len(builds) == 1
    assert told == ["built"]
    await provider.aclose()


async def test_two_calls_together_build_it_once() -> None:
    built: list[Echo] = []

    def build() -> LLMProvider:
        built.append(Echo())
        return built[-1]

    provider = DeferredProvider("echo", "json", build)
    request = _HI
    answers = await asyncio.gather(provider.complete(request), provider.complete(request))
    assert [a.content for a in answers] == ["hi", "hi"]
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


async def test_the_build_runs_off_the_event_loop() -> None:
    """Building an SDK client loads the CA bundle: not on the loop's thread."""
    threads: list[threading.Thread] = []

    def build() -> LLMProvider:
        threads.append(threading.current_thread())
        return Echo()

    provider = DeferredProvider("echo", "json", build)
    await provider.complete(_HI)
    assert threads
    assert threads[0] is not threading.main_thread()
    await provider.aclose()


async def test_closed_while_building_the_built_one_is_closed_and_calls_fail() -> None:
    build = GatedBuild()
    built = build.built
    provider = DeferredProvider("echo", "json", build)
    call = asyncio.create_task(provider.complete(_HI))
    await build.started()
    closing = asyncio.create_task(provider.aclose())  # it waits for the build
    build.release.set()
    await closing
    with pytest.raises(ProviderError, match="is closed"):
        await call
    assert len(built) == 1
    assert built[0].closed
    with pytest.raises(ProviderError, match="is closed"):  # and nothing is built again
        await provider.complete(_HI)
    assert len(built) == 1


async def test_a_call_cancelled_during_the_build_leaves_it_to_the_next_one() -> None:
    """The build thread cannot be stopped: what it builds is used (and closed
    in the end), and no second build starts."""
    build = GatedBuild()
    built = build.built
    provider = DeferredProvider("echo", "json", build)
    first = asyncio.create_task(provider.complete(_HI))
    await build.started()
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    second = asyncio.create_task(provider.complete(_HI))
    build.release.set()
    assert (await second).content == "hi"
    assert len(built) == 1
    await provider.aclose()
    assert built[0].closed


async def test_a_failed_build_is_tried_again_by_the_next_call() -> None:
    attempts: list[int] = []

    def build() -> LLMProvider:
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("first build fails")
        return Echo()

    provider = DeferredProvider("echo", "json", build)
    with pytest.raises(RuntimeError, match="first build fails"):
        await provider.complete(_HI)
    await provider.complete(_HI)
    assert len(attempts) == 2
    await provider.aclose()


async def test_closing_waits_for_a_stuck_build_only_so_long() -> None:
    """An import that never ends must not hold shutdown: aclose gives up on
    it after `close_wait_secs`; what it builds afterwards is closed, not used."""
    gate = GatedBuild()
    provider = DeferredProvider("echo", "json", gate, close_wait_secs=0.05)
    call = asyncio.create_task(provider.complete(_HI))
    await gate.started()
    async with asyncio.timeout(3):
        await provider.aclose()
    gate.release.set()
    with pytest.raises(ProviderError, match="closed"):
        await call
    assert [echo.closed for echo in gate.built] == [True]
    with pytest.raises(ProviderError, match="closed"):
        await provider.complete(_HI)
