"""Both providers, each on its SDK's client against its fake service: a
stream whose body ends before the reply does (a proxy cut it) is a failed
call — retried while no text was shown — never a truncated reply."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agent.messages import ChatMessage
from agent.providers.anthropic import AnthropicProvider
from agent.providers.base import LLMProvider, LLMRequest, ProviderSettings, ProviderUnavailable
from agent.providers.openai import OpenAIProvider
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.openai_server import FakeOpenAI, Reply, ScriptedToolCall

KEY = "sk-test-streams-789"
FINISH = {"openai": "stop", "anthropic": "end_turn"}  # how each says a reply is whole


class Waits:
    """Records the retry waits instead of sleeping through them."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.fixture(params=["openai", "anthropic"])
async def served(
    request: pytest.FixtureRequest,
) -> AsyncIterator[tuple[FakeOpenAI | FakeAnthropic, LLMProvider, Waits, str]]:
    kind: str = request.param
    fake = FakeOpenAI() if kind == "openai" else FakeAnthropic()
    async with fake:
        fake.api_key = KEY
        waits = Waits()
        settings = ProviderSettings(name=kind, api_key=KEY, base_url=fake.base_url)
        kinds = {"openai": OpenAIProvider, "anthropic": AnthropicProvider}
        provider: LLMProvider = kinds[kind](settings, sleep=waits)
        try:
            yield fake, provider, waits, kind
        finally:
            await provider.aclose()


def _ask() -> LLMRequest:
    return LLMRequest(model="m", messages=[ChatMessage.user("hi")])


async def test_a_stream_cut_short_after_text_fails_and_is_not_retried(
    served: tuple[FakeOpenAI | FakeAnthropic, LLMProvider, Waits, str],
) -> None:
    fake, provider, waits, _ = served
    fake.add_reply(Reply(text="partial answer here", cut_short=True))
    fake.add_text("must not be used")
    shown: list[str] = []

    async def sink(text: str) -> None:
        shown.append(text)

    with pytest.raises(ProviderUnavailable, match="ended before the reply was complete"):
        await provider.complete(_ask(), sink)
    assert "".join(shown) == "partial answer here"
    assert len(fake.requests) == 1
    assert waits.waits == []


async def test_a_stream_cut_short_before_any_text_is_retried(
    served: tuple[FakeOpenAI | FakeAnthropic, LLMProvider, Waits, str],
) -> None:
    fake, provider, waits, kind = served
    call = ScriptedToolCall("calculator", {"expression": "1"})
    fake.add_reply(Reply(tool_calls=(call,), cut_short=True))
    fake.add_text("whole")

    async def discard(_: str) -> None:
        pass

    reply = await provider.complete(_ask(), discard)
    assert (reply.content, reply.tool_calls, reply.finish_reason) == ("whole", (), FINISH[kind])
    assert len(fake.requests) == 2
    assert len(waits.waits) == 1
