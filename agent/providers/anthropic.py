"""The Anthropic provider (Messages API, native tool use) on the official `anthropic` SDK.

Maps `ChatMessage` lists to Anthropic's shape: system messages joined into the
`system` parameter, tool calls as `tool_use` blocks, tool results as `tool_result`
blocks inside user messages, consecutive same-role messages merged, images as
base64 `image` blocks. Thinking blocks come back as `reasoning_content` (they are
not sent back: their signatures are not stored). Streams text deltas when asked,
retries with `with_retries` (the SDK's own retries are off), and maps SDK errors
to the provider error tree. It never logs keys or message text.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import anthropic
import httpx2
from anthropic.types import Message

from agent.messages import ChatMessage, Role, ToolCall, Usage
from agent.providers.base import (
    DeltaSink,
    LLMRequest,
    LLMResponse,
    ProviderError,
    ProviderSettings,
    ProviderUnavailable,
    ToolSpec,
)
from agent.providers.media import load_media, mention_files
from agent.providers.retry import Sleep, classify_status
from agent.providers.sdk import SdkProvider

__all__ = ["DEFAULT_MAX_TOKENS", "AnthropicProvider", "to_anthropic_messages"]

DEFAULT_MAX_TOKENS = 4096

# Errors sent inside a 200 stream carry only their type; give them the status they imply.
_STREAM_ERROR_STATUS = {
    "rate_limit_error": 429,
    "overloaded_error": 529,
    "api_error": 500,
    "timeout_error": 504,
    "authentication_error": 401,
    "permission_error": 403,
}

Block = dict[str, Any]


async def _user_blocks(message: ChatMessage) -> list[Block]:
    media = await load_media(message.media)
    blocks: list[Block] = [
        {
            "type": "image",
            "source": {"type": "base64", "media_type": image.mime_type, "data": image.data_b64},
        }
        for image in media.images
    ]
    text = mention_files(message.content, media.other_paths)
    if text:  # the API rejects empty text blocks
        blocks.append({"type": "text", "text": text})
    return blocks


def _tool_input(arguments: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        return {"raw_arguments": arguments}
    return value if isinstance(value, dict) else {"value": value}


def _assistant_blocks(message: ChatMessage) -> list[Block]:
    blocks: list[Block] = [{"type": "text", "text": message.content}] if message.content else []
    blocks += [
        {"type": "tool_use", "id": c.id, "name": c.name, "input": _tool_input(c.arguments)}
        for c in message.tool_calls
    ]
    return blocks


def _tool_result_block(message: ChatMessage) -> Block:
    return {"type": "tool_result", "tool_use_id": message.tool_call_id, "content": message.content}


async def to_anthropic_messages(
    messages: Sequence[ChatMessage],
) -> tuple[str, list[dict[str, Any]]]:
    """Return (system text, messages) with same-role neighbours merged."""
    system: list[str] = []
    turns: list[tuple[str, list[Block]]] = []
    for message in messages:
        if message.role is Role.SYSTEM:
            if message.content:
                system.append(message.content)
            continue
        if message.role is Role.ASSISTANT:
            role, blocks = "assistant", _assistant_blocks(message)
        elif message.role is Role.TOOL:
            role, blocks = "user", [_tool_result_block(message)]
        else:
            role, blocks = "user", await _user_blocks(message)
        if not blocks:
            continue
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)
        else:
            turns.append((role, blocks))
    wire = []
    for role, blocks in turns:
        if role == "user":  # tool_result blocks must lead their user message
            blocks.sort(key=lambda b: b["type"] != "tool_result")
        wire.append({"role": role, "content": blocks})
    return "\n\n".join(system), wire


def to_anthropic_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools
    ]


def _parse_message(message: Message) -> LLMResponse:
    text: list[str] = []
    thinking: list[str] = []
    calls: list[ToolCall] = []
    for block in message.content:
        if block.type == "text":
            text.append(block.text)
        elif block.type == "thinking":
            thinking.append(block.thinking)
        elif block.type == "tool_use":
            arguments = json.dumps(block.input, ensure_ascii=False)
            calls.append(ToolCall(block.id, block.name, arguments))
    usage = message.usage
    cached = (usage.cache_read_input_tokens or 0) + (usage.cache_creation_input_tokens or 0)
    return LLMResponse(
        content="".join(text),
        tool_calls=tuple(calls),
        reasoning_content="".join(thinking) or None,
        usage=Usage(usage.input_tokens + cached, usage.output_tokens),
        finish_reason=message.stop_reason,
    )


def map_anthropic_error(exc: Exception, provider: str) -> ProviderError:
    """Translate an SDK/transport exception into the provider error tree."""
    prefix = f"provider '{provider}'"
    if isinstance(exc, anthropic.APIStatusError):
        status = exc.status_code
        if status < 400:  # an `error` event inside a streamed 200 response
            body = exc.body if isinstance(exc.body, dict) else {}
            inner = body.get("error")
            kind = inner.get("type") if isinstance(inner, dict) else None
            status = _STREAM_ERROR_STATUS.get(str(kind), 500)
        return classify_status(provider, status, dict(exc.response.headers), exc.body)
    if isinstance(exc, anthropic.APITimeoutError):
        return ProviderUnavailable(f"{prefix}: request timed out")
    if isinstance(exc, anthropic.APIConnectionError | httpx2.TransportError):
        return ProviderUnavailable(f"{prefix}: connection failed ({type(exc).__name__})")
    if isinstance(exc, anthropic.APIResponseValidationError):
        return ProviderError(f"{prefix}: unexpected response shape")
    if isinstance(exc, anthropic.APIError):
        return ProviderUnavailable(f"{prefix}: stream error")
    return ProviderError(f"{prefix}: {type(exc).__name__}")


class AnthropicProvider(SdkProvider[anthropic.AsyncAnthropic]):
    """`LLMProvider` for the Anthropic Messages API (and compatible endpoints)."""

    def __init__(self, settings: ProviderSettings, *, sleep: Sleep = asyncio.sleep) -> None:
        client = None
        if settings.api_key:
            client = anthropic.AsyncAnthropic(
                api_key=settings.api_key,
                base_url=settings.base_url,
                default_headers=settings.extra_headers or None,
                timeout=settings.timeout_secs,
                max_retries=0,
            )
        super().__init__(settings, client, sleep=sleep)

    async def complete(self, request: LLMRequest, on_delta: DeltaSink | None = None) -> LLMResponse:
        client = self._client_for_call()
        system, messages = await to_anthropic_messages(request.messages)
        params: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens or DEFAULT_MAX_TOKENS,
            "messages": messages,
        }
        if system:
            params["system"] = system
        if request.tools:
            params["tools"] = to_anthropic_tools(request.tools)
        if request.temperature is not None:
            # Not a typed parameter of this SDK version; the API still accepts it.
            params["extra_body"] = {"temperature": request.temperature}

        async def once(sink: DeltaSink | None) -> LLMResponse:
            try:
                if sink is None:
                    return _parse_message(await client.messages.create(**params))
                return await self._stream(client, params, sink)
            except (anthropic.AnthropicError, httpx2.TransportError) as exc:
                raise map_anthropic_error(exc, self.name) from exc

        return await self._with_retries(once, on_delta)

    @staticmethod
    async def _stream(
        client: anthropic.AsyncAnthropic, params: dict[str, Any], sink: DeltaSink
    ) -> LLMResponse:
        async with client.messages.stream(**params) as stream:
            async for event in stream:
                if event.type == "content_block_delta" and event.delta.type == "text_delta":
                    await sink(event.delta.text)
            final = await stream.get_final_message()
        return _parse_message(final)
