"""The Anthropic provider (Messages API, native tool use) on the official `anthropic` SDK.

The body is built by `anthropic_wire` (system blocks, the history in place,
prompt-cache breakpoints unless `prompt_cache` is off). Thinking blocks come
back as `reasoning_content` (they are not sent back: their signatures are not
stored); usage keeps the cache reads and writes apart. Streams text deltas when
asked, retries with `with_retries` (the SDK's own retries are off), and maps
SDK errors to the provider error tree. It never logs keys or message text.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator
from typing import Any, cast

import anthropic
import httpx2
from anthropic.lib.streaming import MessageStreamEvent
from anthropic.types import Message

from agent.messages import ToolCall, Usage
from agent.providers.anthropic_wire import to_anthropic_prompt, to_anthropic_tools
from agent.providers.base import (
    DeltaSink,
    LLMRequest,
    LLMResponse,
    ProviderError,
    ProviderSettings,
    ProviderUnavailable,
)
from agent.providers.retry import Sleep, classify_status
from agent.providers.sdk import CUT_SHORT, SdkProvider, drain_briefly

__all__ = ["DEFAULT_MAX_TOKENS", "AnthropicProvider", "map_anthropic_error"]

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
    read = usage.cache_read_input_tokens or 0
    written = usage.cache_creation_input_tokens or 0
    return LLMResponse(
        content="".join(text),
        tool_calls=tuple(calls),
        reasoning_content="".join(thinking) or None,
        # input_tokens counts only what came after the last breakpoint
        usage=Usage(usage.input_tokens + read + written, usage.output_tokens, read, written),
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
        prompt = await to_anthropic_prompt(request.messages, request.tail)
        tools = to_anthropic_tools(request.tools)
        cache = self._settings.prompt_cache
        if cache.enabled and request.cache_key is not None:
            prompt.mark_cache(tools, cache.ttl)
        params: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens or DEFAULT_MAX_TOKENS,
            "messages": prompt.messages,
        }
        if prompt.system:
            params["system"] = prompt.system
        if tools:
            params["tools"] = tools
        if request.temperature is not None:
            # Not a typed parameter of this SDK version; the API still accepts it.
            params["extra_body"] = {"temperature": request.temperature}

        async def once(sink: DeltaSink | None) -> LLMResponse:
            try:
                if sink is None:
                    return _parse_message(await client.messages.create(**params))
                return await self._stream(self.name, client, params, sink)
            except (anthropic.AnthropicError, httpx2.TransportError) as exc:
                raise map_anthropic_error(exc, self.name) from exc

        return await self._with_retries(once, on_delta)

    @staticmethod
    async def _stream(
        name: str, client: anthropic.AsyncAnthropic, params: dict[str, Any], sink: DeltaSink
    ) -> LLMResponse:
        # The message is whole at message_stop; what follows is only read
        # briefly (`drain_briefly`), as the SDK itself would wait for the
        # body's end until the read timeout.
        async with client.messages.stream(**params) as stream:
            # closed on leaving, so that a break leaves no generator to the
            # loop's finaliser (closing it leaves the SDK's own iterator open)
            events = cast(AsyncGenerator[MessageStreamEvent, None], stream.__aiter__())
            async with contextlib.aclosing(events):
                async for event in events:
                    if event.type == "content_block_delta" and event.delta.type == "text_delta":
                        await sink(event.delta.text)
                    elif event.type == "message_stop":
                        break
                else:  # the body ended first: whole only if the message has its stop reason
                    try:
                        message = await stream.get_final_message()
                    except AssertionError:  # how this SDK says no message began
                        raise ProviderUnavailable(
                            f"provider '{name}': the stream ended without a message"
                        ) from None
                    if message.stop_reason is None:
                        raise ProviderUnavailable(f"provider '{name}': {CUT_SHORT}")
                    return _parse_message(message)
            await drain_briefly(stream)
            return _parse_message(stream.current_message_snapshot)
