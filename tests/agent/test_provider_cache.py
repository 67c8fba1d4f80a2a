"""Prompt-cache hints and cache usage of both providers, through the real SDKs,
against the caching fakes on loopback."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from agent.messages import ChatMessage, Marker, Usage
from agent.providers.anthropic import AnthropicProvider
from agent.providers.base import (
    CacheTTL,
    LLMRequest,
    PromptCacheSettings,
    ProviderError,
    ProviderSettings,
)
from agent.providers.openai import OpenAIProvider, parse_usage, prompt_cache_key
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.prompt_cache import AnthropicCache

AGENT_MD = "You are picobot. " + "Keep answers short and kind. " * 60  # ~300 words
PERSONA = ChatMessage.system(AGENT_MD, Marker.AGENT_PROMPT)


async def _discard(text: str) -> None:
    return None


@pytest.fixture
async def claude() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic(prompt_cache=AnthropicCache(min_tokens=200)) as fake:
        yield fake


@pytest.fixture
async def gpt() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as fake:
        yield fake


def _anthropic(fake: FakeAnthropic, cache: PromptCacheSettings) -> AnthropicProvider:
    return AnthropicProvider(
        ProviderSettings("claude", "k", fake.base_url, max_retries=0, prompt_cache=cache)
    )


def _openai(fake: FakeOpenAI, cache: PromptCacheSettings) -> OpenAIProvider:
    return OpenAIProvider(
        ProviderSettings("gpt", "k", fake.base_url, max_retries=0, prompt_cache=cache)
    )


def _markers(body: dict[str, object]) -> int:
    return str(body).count("'cache_control'")


@pytest.mark.parametrize("stream", [False, True])
async def test_anthropic_reads_back_what_it_cached(claude: FakeAnthropic, stream: bool) -> None:
    provider = _anthropic(claude, PromptCacheSettings())
    try:
        history = [PERSONA, ChatMessage.user("hello there")]
        sink = _discard if stream else None
        first = await provider.complete(LLMRequest("m", history, cache_key="s1"), sink)
        history += [ChatMessage.user("and again")]
        second = await provider.complete(LLMRequest("m", history, cache_key="s1"), sink)
    finally:
        await provider.aclose()
    assert first.usage is not None
    assert second.usage is not None
    assert first.usage.cache_read_tokens == 0
    assert first.usage.cache_write_tokens > 300  # AGENT.md and the first message
    assert second.usage.cache_read_tokens == first.usage.cache_write_tokens
    reported = claude.billed[1][1]
    assert second.usage == Usage(
        reported["input_tokens"]
        + reported["cache_read_input_tokens"]
        + reported["cache_creation_input_tokens"],
        reported["output_tokens"],
        reported["cache_read_input_tokens"],
        reported["cache_creation_input_tokens"],
    )


async def test_anthropic_hints_only_for_conversations_and_not_when_off(
    claude: FakeAnthropic,
) -> None:
    on = _anthropic(claude, PromptCacheSettings(ttl=CacheTTL.ONE_HOUR))
    off = _anthropic(claude, PromptCacheSettings(enabled=False))
    history = [PERSONA, ChatMessage.user("hi")]
    try:
        await on.complete(LLMRequest("m", history, cache_key="s1"))
        await on.complete(LLMRequest("m", history))  # a one-off call: a summary
        await off.complete(LLMRequest("m", history, cache_key="s1"))
    finally:
        await on.aclose()
        await off.aclose()
    conversation, one_off, disabled = claude.requests
    assert _markers(conversation) == 2  # AGENT.md and the latest message
    assert conversation["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert _markers(one_off) == 0
    assert _markers(disabled) == 0
    assert disabled["system"] == [{"type": "text", "text": AGENT_MD}]  # same layout
    assert claude.billed[2][1]["cache_read_input_tokens"] == 0


async def test_the_fake_refuses_a_fifth_breakpoint(claude: FakeAnthropic) -> None:
    provider = _anthropic(claude, PromptCacheSettings(enabled=False))
    marked = {"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}
    body = {
        "model": "m",
        "max_tokens": 10,
        "system": [marked] * 3,
        "messages": [{"role": "user", "content": [marked, marked]}],
    }
    try:
        route = provider._client_for_call()
        with pytest.raises(ProviderError, match="A maximum of 4 blocks with cache_control"):
            await route.post(provider.name, json.dumps(body).encode())
    finally:
        await provider.aclose()


async def test_openai_sends_a_hashed_session_key_only_when_told(gpt: FakeOpenAI) -> None:
    keyed = _openai(gpt, PromptCacheSettings(send_key=True))
    plain = _openai(gpt, PromptCacheSettings())
    history = [ChatMessage.user("hi")]
    try:
        await keyed.complete(LLMRequest("m", history, cache_key="telegram:42"))
        await keyed.complete(LLMRequest("m", history, cache_key="telegram:42"))
        await keyed.complete(LLMRequest("m", history, cache_key="telegram:43"))
        await keyed.complete(LLMRequest("m", history))  # a one-off call
        await plain.complete(LLMRequest("m", history, cache_key="telegram:42"))
    finally:
        await keyed.aclose()
        await plain.aclose()
    keys = [body.get("prompt_cache_key") for body in gpt.requests]
    assert keys[0] == keys[1] == prompt_cache_key("telegram:42")
    assert keys[2] not in (keys[0], None)
    assert "42" not in str(keys[0])  # no chat id in clear
    assert keys[3:] == [None, None]


async def test_a_server_refusing_unknown_fields_works_with_the_key_off() -> None:
    standard = frozenset({"model", "messages", "tools", "stream", "stream_options"})
    async with FakeOpenAI(accepted_fields=standard) as strict:
        keyed = _openai(strict, PromptCacheSettings(send_key=True))
        plain = _openai(strict, PromptCacheSettings(send_key=False))
        request = LLMRequest("m", [ChatMessage.user("hi")], cache_key="s1")
        try:
            with pytest.raises(ProviderError, match="Unrecognized request argument"):
                await keyed.complete(request)
            assert (await plain.complete(request)).content == "echo: hi"
        finally:
            await keyed.aclose()
            await plain.aclose()


@pytest.mark.parametrize("stream", [False, True])
async def test_openai_reports_the_cached_prefix(gpt: FakeOpenAI, stream: bool) -> None:
    provider = _openai(gpt, PromptCacheSettings())
    long_prompt = ChatMessage.system("word " * 1500)
    sink = _discard if stream else None
    try:
        first = await provider.complete(LLMRequest("m", [long_prompt, ChatMessage.user("a")]), sink)
        second = await provider.complete(
            LLMRequest("m", [long_prompt, ChatMessage.user("b")]), sink
        )
    finally:
        await provider.aclose()
    assert first.usage == Usage(1501, 2, 0, 0)
    assert second.usage == Usage(1501, 2, 1408, 0)  # 1,500 shared words, in steps of 128


def test_usage_fields_of_compatible_services() -> None:
    openai = {"prompt_tokens": 100, "completion_tokens": 5}
    openai["prompt_tokens_details"] = {"cached_tokens": 64, "cache_write_tokens": 30}  # type: ignore[assignment]
    assert parse_usage(openai) == Usage(100, 5, 64, 30)
    deepseek = {"prompt_tokens": 100, "completion_tokens": 5, "prompt_cache_hit_tokens": 80}
    assert parse_usage(deepseek) == Usage(100, 5, 80, 0)
    assert parse_usage({"prompt_tokens": 7, "completion_tokens": 1}) == Usage(7, 1)


async def test_openai_sends_the_tail_after_the_history(gpt: FakeOpenAI) -> None:
    provider = _openai(gpt, PromptCacheSettings())
    tail = [ChatMessage.system("memory: likes tea", "memory")]
    try:
        await provider.complete(LLMRequest("m", [PERSONA, ChatMessage.user("hi")], tail=tail))
    finally:
        await provider.aclose()
    assert gpt.requests[0]["messages"] == [
        {"role": "system", "content": AGENT_MD},
        {"role": "user", "content": "hi"},
        {"role": "system", "content": "memory: likes tea"},
    ]
