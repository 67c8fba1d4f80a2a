"""A large request body goes out after the headers as it is (no copy of the
whole body joined to the headers), and reaches the server whole: both
providers against their fake servers."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from agent.messages import ChatMessage, Role
from agent.providers.anthropic import AnthropicProvider
from agent.providers.base import LLMProvider, LLMRequest, ProviderSettings
from agent.providers.openai import OpenAIProvider
from agent.providers.route import _AfterHeaders
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.openai_server import FakeOpenAI

KEY = "sk-test-parts"


class Recorder:
    """A stream writer that keeps what it was asked to send, in order."""

    def __init__(self) -> None:
        self.sent: list[object] = []

    def send_headers(self) -> None:
        self.sent.append("headers")

    async def write(self, chunk: object) -> None:
        self.sent.append(chunk)


async def test_a_large_body_is_written_after_the_headers_as_it_is() -> None:
    body = b"x" * 100_000
    recorder = Recorder()
    await _AfterHeaders(body).write_with_length(recorder, None)  # type: ignore[arg-type]
    headers, view = recorder.sent
    assert headers == "headers"
    assert isinstance(view, memoryview)
    assert view.obj is body  # the same bytes, not a copy
    assert _AfterHeaders(body).size == len(body)


def _history(count: int) -> list[ChatMessage]:
    """A conversation whose request is well past the size sent in parts."""
    out = [ChatMessage.system("You are terse.")]
    for i in range(count):
        out.append(ChatMessage.user(f"question {i} " + "q" * 40))
        out.append(ChatMessage(Role.ASSISTANT, f"answer {i} " + "a" * 40))
    return out


@pytest.fixture
async def openai_fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        server.api_key = KEY
        yield server


@pytest.fixture
async def anthropic_fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        server.api_key = KEY
        yield server


async def _twice(provider: LLMProvider, model: str) -> list[ChatMessage]:
    """Two turns of a long conversation, one streamed; the second request's history."""
    history = _history(800)
    try:
        await provider.complete(LLMRequest(model=model, messages=[*history, ChatMessage.user("a")]))
        history += [ChatMessage.user("a"), ChatMessage(Role.ASSISTANT, "ok")]
        history.append(ChatMessage.user("b"))

        async def shown(_: str) -> None:
            pass

        await provider.complete(LLMRequest(model=model, messages=history), shown)
    finally:
        await provider.aclose()
    return history


async def test_a_long_openai_conversation_reaches_the_server_whole(openai_fake: FakeOpenAI) -> None:
    openai_fake.add_text("ok")
    openai_fake.add_text("ok again")
    settings = ProviderSettings(name="default", api_key=KEY, base_url=openai_fake.base_url)
    history = await _twice(OpenAIProvider(settings), "gpt-test")
    first, second = openai_fake.requests
    assert len(json.dumps(second)) > 100_000
    assert [m["content"] for m in second["messages"]] == [m.content for m in history]
    assert len(first["messages"]) == len(history) - 2
    assert second["stream"] is True


async def test_a_long_anthropic_conversation_reaches_the_server_whole(
    anthropic_fake: FakeAnthropic,
) -> None:
    anthropic_fake.add_text("ok")
    anthropic_fake.add_text("ok again")
    settings = ProviderSettings(name="claude", api_key=KEY, base_url=anthropic_fake.base_url)
    history = await _twice(AnthropicProvider(settings), "claude-test")
    second = anthropic_fake.requests[1]
    assert len(json.dumps(second)) > 100_000
    sent = [m["content"] for m in second["messages"]]
    texts = [c if isinstance(c, str) else "".join(b["text"] for b in c) for c in sent]
    assert texts == [m.content for m in history[1:]]  # the system prompt goes apart
