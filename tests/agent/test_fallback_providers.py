"""FallbackProvider over the real providers and their fakes on loopback: a
history holding one provider's tool calls reaches the other in its format
(OpenAI tool_calls ⇄ Anthropic tool_use/tool_result), both ways."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agent.messages import ChatMessage, Role, ToolCall
from agent.providers.anthropic import AnthropicProvider
from agent.providers.base import LLMProvider, LLMRequest, ProviderSettings
from agent.providers.fallback import FallbackProvider, FallbackSwitch, FallbackTarget
from agent.providers.openai import OpenAIProvider
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.openai_server import FakeOpenAI

KEY = "test-key"
OPENAI_CALL = ToolCall("call_abc123", "read_file", '{"path": "notes.txt"}')
ANTHROPIC_CALL = ToolCall("toolu_01XYZ", "read_file", '{"path": "todo.txt"}')


def history() -> list[ChatMessage]:
    """Two tool rounds, one made by each provider (their own id styles)."""
    return [
        ChatMessage.user("read my notes"),
        ChatMessage(Role.ASSISTANT, "", tool_calls=(OPENAI_CALL,)),
        ChatMessage.tool_result(OPENAI_CALL, "buy milk"),
        ChatMessage(Role.ASSISTANT, "Checking.", tool_calls=(ANTHROPIC_CALL,)),
        ChatMessage.tool_result(ANTHROPIC_CALL, "call mum"),
        ChatMessage.user("anything else?"),
    ]


def settings(name: str, url: str) -> ProviderSettings:
    # one retry whose wait (the budget) is far below the Retry-After: then given up on
    return ProviderSettings(
        name=name, api_key=KEY, base_url=url, max_retries=1, retry_max_wait_secs=0.01
    )


@pytest.fixture
async def servers() -> AsyncIterator[tuple[FakeOpenAI, FakeAnthropic]]:
    async with FakeOpenAI() as openai, FakeAnthropic() as anthropic:
        openai.api_key = anthropic.api_key = KEY
        yield openai, anthropic


async def ask(primary: LLMProvider, backup: LLMProvider, model: str) -> tuple[str, list[Any]]:
    switches: list[FallbackSwitch] = []
    fallback = FallbackProvider(
        [FallbackTarget(primary, None, 100_000), FallbackTarget(backup, model, 100_000)],
        on_switch=switches.append,
    )
    request = LLMRequest(model="primary-model", messages=history(), cache_key="s")
    try:
        response = await fallback.complete(request)
    finally:
        await primary.aclose()
        await backup.aclose()
    assert response.model == model
    return response.content, switches


def rate_limit_everything(server: FakeOpenAI | FakeAnthropic) -> None:
    for _ in range(2):
        server.add_error(429, headers={"Retry-After": "3600"})


async def test_openai_tool_calls_reach_an_anthropic_fallback_as_blocks(
    servers: tuple[FakeOpenAI, FakeAnthropic],
) -> None:
    openai, anthropic = servers
    rate_limit_everything(openai)
    anthropic.add_text("from claude")
    text, switches = await ask(
        OpenAIProvider(settings("gpt", openai.base_url)),
        AnthropicProvider(settings("claude", anthropic.base_url)),
        "claude-fake",
    )
    assert text == "from claude"
    assert len(openai.requests) == 2  # the first call and its one retry
    assert [s.reason for s in switches] == ["rate_limited"]
    body = anthropic.requests[0]
    assert body["model"] == "claude-fake"
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["user", "assistant", "user", "assistant", "user"]  # results merged in
    uses = [b for m in body["messages"] for b in m["content"] if b.get("type") == "tool_use"]
    assert [(u["id"], u["name"], u["input"]) for u in uses] == [
        ("call_abc123", "read_file", {"path": "notes.txt"}),
        ("toolu_01XYZ", "read_file", {"path": "todo.txt"}),
    ]
    results = [b for m in body["messages"] for b in m["content"] if b.get("type") == "tool_result"]
    assert [r["tool_use_id"] for r in results] == ["call_abc123", "toolu_01XYZ"]
    assert "buy milk" in json.dumps(results[0]["content"])


async def test_anthropic_tool_calls_reach_an_openai_fallback_as_tool_calls(
    servers: tuple[FakeOpenAI, FakeAnthropic],
) -> None:
    openai, anthropic = servers
    rate_limit_everything(anthropic)
    openai.add_text("from gpt")
    text, _ = await ask(
        AnthropicProvider(settings("claude", anthropic.base_url)),
        OpenAIProvider(settings("gpt", openai.base_url)),
        "gpt-fake",
    )
    assert text == "from gpt"
    assert len(anthropic.requests) == 2
    body = openai.requests[0]
    assert body["model"] == "gpt-fake"
    calls = [c for m in body["messages"] for c in m.get("tool_calls") or ()]
    assert [(c["id"], c["function"]["name"]) for c in calls] == [
        ("call_abc123", "read_file"),
        ("toolu_01XYZ", "read_file"),
    ]
    # arguments as the JSON text OpenAI wants, not an object
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [
        {"path": "notes.txt"},
        {"path": "todo.txt"},
    ]
    tool_messages = [m for m in body["messages"] if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in tool_messages] == [
        ("call_abc123", "buy milk"),
        ("toolu_01XYZ", "call mum"),
    ]


async def test_an_overloaded_anthropic_primary_falls_back(
    servers: tuple[FakeOpenAI, FakeAnthropic],
) -> None:
    openai, anthropic = servers
    for _ in range(2):
        anthropic.add_error(529)
    openai.add_text("from gpt")
    text, switches = await ask(
        AnthropicProvider(settings("claude", anthropic.base_url)),
        OpenAIProvider(settings("gpt", openai.base_url)),
        "gpt-fake",
    )
    assert text == "from gpt"
    assert [s.reason for s in switches] == ["unavailable"]


async def test_a_model_the_service_lacks_falls_back(
    servers: tuple[FakeOpenAI, FakeAnthropic],
) -> None:
    openai, anthropic = servers
    openai.add_error(
        404, {"error": {"message": "The model does not exist", "code": "model_not_found"}}
    )
    anthropic.add_text("from claude")
    text, switches = await ask(
        OpenAIProvider(settings("gpt", openai.base_url)),
        AnthropicProvider(settings("claude", anthropic.base_url)),
        "claude-fake",
    )
    assert text == "from claude"
    assert len(openai.requests) == 1  # not retried
    assert [s.reason for s in switches] == ["model_not_found"]
