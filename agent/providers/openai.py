"""The OpenAI-compatible provider (OpenAI, DeepSeek, Qwen, Kimi, GLM, Ollama, vLLM…).

Maps `ChatMessage` lists to chat-completions messages and back on the official
`openai` SDK, streams text deltas when asked, keeps DeepSeek-style
`reasoning_content`, and turns SDK errors into the provider error tree. Retries
are ours (`with_retries`); the SDK's own are off. It never logs keys or message text.

These services cache a repeated request prefix on their own; what helps is
that the prefix does not change (the messages come in the context builder's
order, the request's tail last) and, where the endpoint accepts the field, a
per-conversation `prompt_cache_key` (`providers.<name>.prompt_cache_key`).
Usage keeps the cached part of the prompt apart.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import openai

from agent.messages import ChatMessage, Role, ToolCall, Usage
from agent.providers.base import (
    DeltaSink,
    LLMRequest,
    LLMResponse,
    ProviderContextOverflow,
    ProviderError,
    ProviderSettings,
    ProviderUnavailable,
    ToolSpec,
)
from agent.providers.events import DeltaBatch, event_json, read_events
from agent.providers.media import load_media, mention_files
from agent.providers.openai_body import BodyEncoder
from agent.providers.retry import Sleep, is_context_overflow, server_message
from agent.providers.route import (
    TRANSPORT_ERRORS,
    Route,
    sdk_route,
    transport_failure,
)
from agent.providers.sdk import CUT_SHORT, SdkProvider

__all__ = [
    "OpenAIProvider",
    "parse_usage",
    "prompt_cache_key",
    "to_openai_message",
    "to_openai_messages",
    "to_openai_tools",
    "tool_images_message",
]

_REASONING_FIELDS = ("reasoning_content", "reasoning")


# Requests and responses stay plain JSON: the body is bytes built once per
# message (agent.providers.openai_body), sent by agent.providers.route (why:
# see there) and read by agent.providers.events, and chunks are read as
# dicts. A test holds the request equal to the one `client.post` sends
# (tests/agent/test_openai_provider.py).
_PATH = "/chat/completions"
_STREAMED: dict[str, Any] = {"stream": True, "stream_options": {"include_usage": True}}


async def _user_message(message: ChatMessage) -> dict[str, Any]:
    media = await load_media(message.media)
    text = mention_files(message.content, media.other_paths)
    if not media.images:
        return {"role": "user", "content": text}
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    parts += [{"type": "image_url", "image_url": {"url": image.data_uri}} for image in media.images]
    return {"role": "user", "content": parts}


def _assistant_message(message: ChatMessage) -> dict[str, Any]:
    out: dict[str, Any] = {"role": "assistant", "content": message.content}
    if message.tool_calls:
        out["content"] = message.content or None
        out["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
        # DeepSeek/Kimi thinking models require the reasoning back inside a tool loop.
        if message.reasoning_content:
            out["reasoning_content"] = message.reasoning_content
    return out


async def to_openai_message(message: ChatMessage) -> dict[str, Any]:
    if message.role is Role.SYSTEM:
        return {"role": "system", "content": message.content}
    if message.role is Role.USER:
        if not message.media:
            return {"role": "user", "content": message.content}
        return await _user_message(message)
    if message.role is Role.ASSISTANT:
        return _assistant_message(message)
    return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}


async def tool_images_message(messages: Sequence[ChatMessage], i: int) -> list[dict[str, Any]]:
    """What follows message `i` besides itself: after the last tool message of
    a run, a user message with the run's images. A tool message holds text
    only, and no other message may come between an assistant's tool calls
    and their results, so the images of all the run's results come after it."""
    if messages[i].role is not Role.TOOL:
        return []
    if i + 1 < len(messages) and messages[i + 1].role is Role.TOOL:
        return []
    start = i
    while start > 0 and messages[start - 1].role is Role.TOOL:
        start -= 1
    parts: list[dict[str, Any]] = []
    for message in messages[start : i + 1]:
        if not message.media:
            continue
        media = await load_media(message.media)
        if not media.images:
            continue
        note = f"[images in the result of {message.name or 'a tool'} ({message.tool_call_id})]"
        parts.append({"type": "text", "text": note})
        parts += [{"type": "image_url", "image_url": {"url": im.data_uri}} for im in media.images]
    return [{"role": "user", "content": parts}] if parts else []


async def to_openai_messages(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, message in enumerate(messages):
        out.append(await to_openai_message(message))
        out += await tool_images_message(messages, i)
    return out


def to_openai_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in tools
    ]


def _obj(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _reasoning_of(part: dict[str, Any]) -> str | None:
    for key in _REASONING_FIELDS:
        value = part.get(key)
        if isinstance(value, str):
            return value
    return None


def _int(value: object) -> int:
    return value if isinstance(value, int) else 0


def parse_usage(raw: object) -> Usage | None:
    """`prompt_tokens` includes the cached part: OpenAI's
    `prompt_tokens_details.cached_tokens` (and `cache_write_tokens`), or
    DeepSeek's `prompt_cache_hit_tokens`."""
    usage = _obj(raw)
    if not usage:
        return None
    details = _obj(usage.get("prompt_tokens_details"))
    return Usage(
        _int(usage.get("prompt_tokens")),
        _int(usage.get("completion_tokens")),
        _int(details.get("cached_tokens")) or _int(usage.get("prompt_cache_hit_tokens")),
        _int(details.get("cache_write_tokens")),
    )


def prompt_cache_key(conversation: str) -> str:
    """The `prompt_cache_key` of a conversation: stable, and no chat id in clear."""
    return "picobot-" + hashlib.sha256(conversation.encode()).hexdigest()[:32]


@dataclass(slots=True)
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: str = ""

    def finish(self, index: int) -> ToolCall:
        call_id = self.id or f"call_{index}_{uuid.uuid4().hex[:12]}"
        return ToolCall(call_id, self.name, self.arguments or "{}")


class _StreamAssembler:
    """Collects chunks (plain JSON objects) into one response, forwarding text
    deltas as they come."""

    def __init__(self, on_delta: DeltaSink) -> None:
        self._on_delta = on_delta
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, _PartialCall] = {}
        self.usage: Usage | None = None
        self.finish_reason: str | None = None

    async def feed(self, raw: object) -> None:
        chunk = _obj(raw)
        self.usage = parse_usage(chunk.get("usage")) or self.usage
        for choice in map(_obj, chunk.get("choices") or ()):
            delta = _obj(choice.get("delta"))
            reasoning = _reasoning_of(delta)
            if reasoning:
                self.reasoning.append(reasoning)
            for part in map(_obj, delta.get("tool_calls") or ()):
                index = part.get("index")
                partial = self.calls.setdefault(
                    index if isinstance(index, int) else 0, _PartialCall()
                )
                partial.id = partial.id or _text(part.get("id"))
                function = _obj(part.get("function"))
                partial.name = partial.name or _text(function.get("name"))
                partial.arguments += _text(function.get("arguments"))
            if choice.get("finish_reason"):
                self.finish_reason = _text(choice.get("finish_reason"))
            content = _text(delta.get("content"))
            if content:
                self.text.append(content)
                await self._on_delta(content)

    def response(self) -> LLMResponse:
        calls = tuple(self.calls[i].finish(i) for i in sorted(self.calls))
        return LLMResponse(
            content="".join(self.text),
            tool_calls=calls,
            reasoning_content="".join(self.reasoning) or None,
            usage=self.usage,
            finish_reason=self.finish_reason,
        )


class _StreamError(Exception):
    """An error event in the middle of a stream (where the SDK raises `APIError`)."""

    def __init__(self, message: str, body: object) -> None:
        super().__init__(message)
        self.body = body


async def _dispatch(payload: str, assembler: _StreamAssembler) -> bool:
    """One server-sent event's data: a chunk, or an error; True for the end (`[DONE]`)."""
    if payload.startswith("[DONE]"):
        return True
    try:
        chunk = event_json(payload)
    except ValueError:
        raise _StreamError("an event that is not JSON", None) from None
    error = chunk.get("error") if isinstance(chunk, dict) else None
    if error:
        message = error.get("message") if isinstance(error, dict) else None
        if not isinstance(message, str) or not message:
            message = "An error occurred during streaming"
        raise _StreamError(message, error)
    await assembler.feed(chunk)
    return False


def _parse_completion(raw: object, provider: str) -> LLMResponse:
    choices = _obj(raw).get("choices")
    if not isinstance(choices, list) or not choices:
        raise ProviderError(f"provider '{provider}' returned no choices")
    choice = _obj(choices[0])
    message = _obj(choice.get("message"))
    calls: list[ToolCall] = []
    for i, call in enumerate(map(_obj, message.get("tool_calls") or ())):
        if call.get("type", "function") == "function":
            function = _obj(call.get("function"))
            partial = _PartialCall(
                _text(call.get("id")), _text(function.get("name")), _text(function.get("arguments"))
            )
            calls.append(partial.finish(i))
    return LLMResponse(
        content=_text(message.get("content")),
        tool_calls=tuple(calls),
        reasoning_content=_reasoning_of(message),
        usage=parse_usage(_obj(raw).get("usage")),
        finish_reason=_text(choice.get("finish_reason")) or None,
    )


def map_openai_error(exc: Exception, provider: str) -> ProviderError:
    """Translate a transport exception, or an error event in the middle of a
    stream, into the provider error tree; HTTP error statuses are classified
    where the response arrives."""
    prefix = f"provider '{provider}'"
    if isinstance(exc, TRANSPORT_ERRORS):
        return transport_failure(exc, provider)
    if isinstance(exc, _StreamError):
        detail = f"{prefix}: {server_message(exc.body) or 'stream error'}"
        if is_context_overflow(exc.body):  # compacted and tried once more, not retried as is
            return ProviderContextOverflow(detail)
        return ProviderUnavailable(detail)
    return ProviderError(f"{prefix}: {type(exc).__name__}")


def _json_of(body: bytes, provider: str) -> object:
    try:
        return json.loads(body)
    except (ValueError, RecursionError):  # not JSON; nested too deeply to read
        raise ProviderError(f"provider '{provider}': unexpected response shape") from None


def _route(settings: ProviderSettings) -> Route:
    return sdk_route(openai.AsyncOpenAI, openai.DefaultAioHttpClient, settings, _PATH)


class OpenAIProvider(SdkProvider[Route]):
    """`LLMProvider` for any OpenAI-compatible chat-completions endpoint."""

    def __init__(self, settings: ProviderSettings, *, sleep: Sleep = asyncio.sleep) -> None:
        route = _route(settings) if settings.api_key else None
        super().__init__(settings, route, sleep=sleep)
        self._bodies = BodyEncoder(to_openai_message, trailer=tool_images_message)

    async def complete(self, request: LLMRequest, on_delta: DeltaSink | None = None) -> LLMResponse:
        route = self._client_for_call()
        messages = [*request.messages, *request.tail]  # the tail after the cacheable prefix
        tools = request.tools
        params: dict[str, Any] = {"model": request.model}
        cache = self._settings.prompt_cache
        if cache.enabled and cache.send_key and request.cache_key:
            params["prompt_cache_key"] = prompt_cache_key(request.cache_key)
        if request.temperature is not None:
            params["temperature"] = request.temperature
        if request.max_tokens is not None:
            params["max_tokens"] = request.max_tokens

        async def once(sink: DeltaSink | None) -> LLMResponse:
            extra = params if sink is None else {**params, **_STREAMED}
            body = await self._bodies.body(
                request.cache_key, messages, tools, lambda: to_openai_tools(tools), extra
            )
            try:
                if sink is None:
                    whole = await route.post(self.name, body)
                    return _parse_completion(_json_of(whole.body, self.name), self.name)
                return await self._stream(route, body, sink)
            except (_StreamError, *TRANSPORT_ERRORS) as exc:
                raise map_openai_error(exc, self.name) from exc

        return await self._with_retries(once, on_delta)

    async def _stream(self, route: Route, body: bytes, sink: DeltaSink) -> LLMResponse:
        deltas = DeltaBatch(sink)
        assembler = _StreamAssembler(deltas)
        response = await route.stream(self.name, body)

        async def dispatch(_: str, payload: str) -> bool:  # the data says the kind
            return await _dispatch(payload, assembler)

        # A body that ends with neither [DONE] nor a finish reason was cut
        # short (a proxy, a dropped upstream): a failed call, not a reply.
        if not await read_events(response, dispatch, deltas) and assembler.finish_reason is None:
            raise ProviderUnavailable(f"provider '{self.name}': {CUT_SHORT}")
        return assembler.response()
