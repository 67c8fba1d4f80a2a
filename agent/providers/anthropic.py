"""The Anthropic provider (Messages API, native tool use) on the official `anthropic` SDK.

The body is built by `anthropic_wire` (system blocks, the history in place,
prompt-cache breakpoints unless `prompt_cache` is off). It goes out on the
aiohttp session of the SDK client's HTTP client with the URL and headers the
SDK gives it, and the
reply (a JSON message, or its stream of events) is read as plain JSON
(agent.providers.route: the typed `messages.stream` builds a model per event
and costs about four times the CPU of the whole exchange). Thinking blocks
come back as `reasoning_content` (they are not sent back: their signatures
are not stored); usage keeps the cache reads and writes apart. Streams text
deltas when asked, retries with `with_retries` (the SDK's own retries are
off), and maps errors to the provider error tree. It never logs keys or
message text.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import anthropic

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
from agent.providers.events import DeltaBatch, event_json, read_events
from agent.providers.retry import Sleep, classify_status
from agent.providers.route import (
    TRANSPORT_ERRORS,
    Route,
    Whole,
    sdk_route,
    transport_failure,
)
from agent.providers.sdk import CUT_SHORT, SdkProvider

__all__ = ["DEFAULT_MAX_TOKENS", "AnthropicProvider"]

DEFAULT_MAX_TOKENS = 4096

# Errors sent inside a 200 stream carry only their type; give them the status they imply.
_STREAM_ERROR_STATUS = {
    "rate_limit_error": 429,
    "overloaded_error": 529,
    "api_error": 500,
    "timeout_error": 504,
    "authentication_error": 401,
    "permission_error": 403,
    # as the API answers them before a stream: refused, not retried; a
    # prompt too long for the model is compacted and tried once more
    "invalid_request_error": 400,
    "not_found_error": 404,
    "request_too_large": 413,
}


_PATH = "/v1/messages"


def _obj(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: object) -> int:
    return value if isinstance(value, int) else 0


def _parse_message(raw: object) -> LLMResponse:
    """A message (the API's JSON, or one assembled from a stream's events)."""
    message = _obj(raw)
    text: list[str] = []
    thinking: list[str] = []
    calls: list[ToolCall] = []
    for block in map(_obj, message.get("content") or ()):
        kind = block.get("type")
        if kind == "text":
            text.append(str(block.get("text") or ""))
        elif kind == "thinking":
            thinking.append(str(block.get("thinking") or ""))
        elif kind == "tool_use":
            given = block.get("input")
            # a string: input JSON that did not parse (cut off): the loop says so
            arguments = (
                given if isinstance(given, str) else json.dumps(given or {}, ensure_ascii=False)
            )
            calls.append(
                ToolCall(str(block.get("id") or ""), str(block.get("name") or ""), arguments)
            )
    usage = _obj(message.get("usage"))
    read = _int(usage.get("cache_read_input_tokens"))
    written = _int(usage.get("cache_creation_input_tokens"))
    stop = message.get("stop_reason")
    return LLMResponse(
        content="".join(text),
        tool_calls=tuple(calls),
        reasoning_content="".join(thinking) or None,
        # input_tokens counts only what came after the last breakpoint
        usage=Usage(
            _int(usage.get("input_tokens")) + read + written,
            _int(usage.get("output_tokens")),
            read,
            written,
        ),
        finish_reason=stop if isinstance(stop, str) else None,
    )


class _MessageAssembler:
    """A stream's events (plain JSON objects) folded into the message they
    describe, as the SDK's own accumulator does, forwarding text deltas."""

    def __init__(self, provider: str, on_delta: DeltaSink, headers: Mapping[str, str]) -> None:
        self._provider = provider
        self._on_delta = on_delta
        self._headers = headers  # the response's: an error event's Retry-After
        self.message: dict[str, Any] | None = None  # from message_start on
        self._blocks: dict[int, dict[str, Any]] = {}
        self._inputs: dict[int, list[str]] = {}  # a tool_use block's input JSON, in pieces

    async def feed(self, name: str, payload: str) -> bool:
        """One event; True at message_stop (the message is whole)."""
        try:
            event = _obj(event_json(payload))
        except ValueError:
            raise ProviderUnavailable(
                f"provider '{self._provider}': stream error (an event that is not JSON)"
            ) from None
        kind = event.get("type")
        if name == "error" or kind == "error":  # as the SDK: the event's name is enough
            raise _error_of(self._provider, event, self._headers)
        if kind == "content_block_delta":
            await self._delta(event.get("index"), _obj(event.get("delta")))
        elif kind == "message_start":
            self.message = {**_obj(event.get("message")), "content": []}
            self.message["usage"] = dict(_obj(self.message.get("usage")))
        elif kind == "content_block_start" and isinstance(event.get("index"), int):
            self._blocks[event["index"]] = dict(_obj(event.get("content_block")))
        elif kind == "message_delta" and self.message is not None:
            self.message.update(
                (k, v) for k, v in _obj(event.get("delta")).items() if v is not None
            )
            self.message["usage"].update(
                (k, v) for k, v in _obj(event.get("usage")).items() if v is not None
            )
        elif kind == "message_stop":
            return True
        return False  # ping, content_block_stop, and kinds added later

    async def _delta(self, index: object, delta: dict[str, Any]) -> None:
        if not isinstance(index, int):
            return
        kind = delta.get("type")
        if kind == "text_delta":  # kept as shown, even without its block's start
            text = self._blocks.setdefault(index, {"type": "text", "text": ""})
            piece = str(delta.get("text") or "")
            text["text"] = str(text.get("text") or "") + piece
            if piece:
                await self._on_delta(piece)
            return
        block = self._blocks.get(index)
        if block is None:
            return
        if kind == "input_json_delta":
            self._inputs.setdefault(index, []).append(str(delta.get("partial_json") or ""))
        elif kind == "thinking_delta":
            block["thinking"] = str(block.get("thinking") or "") + str(delta.get("thinking") or "")

    def result(self) -> dict[str, Any]:
        """The message so far (whole after message_stop)."""
        assert self.message is not None
        for index, pieces in self._inputs.items():
            raw = "".join(pieces)
            try:
                self._blocks[index]["input"] = json.loads(raw) if raw else {}
            except (ValueError, RecursionError):  # cut off (max_tokens); too deep to read
                # (the loop reports bad arguments)
                self._blocks[index]["input"] = raw
        self.message["content"] = [self._blocks[i] for i in sorted(self._blocks)]
        return self.message


def _error_of(provider: str, body: object, headers: Mapping[str, str]) -> ProviderError:
    """An `error` in a 200 response (a stream's event, or a proxy's body):
    its type says what status it means."""
    inner = _obj(_obj(body).get("error"))
    status = _STREAM_ERROR_STATUS.get(str(inner.get("type")), 500)
    return classify_status(provider, status, headers, body)


def _message_of(provider: str, response: Whole) -> LLMResponse:
    """A whole (not streamed) reply: a message, or an error in a 200 body."""
    try:
        raw = json.loads(response.body)
    except (ValueError, RecursionError):  # not JSON; nested too deeply to read
        raw = None
    kind = _obj(raw).get("type")
    if kind == "error":
        raise _error_of(provider, raw, dict(response.headers))
    if kind != "message" or not isinstance(_obj(raw).get("content"), list):
        raise ProviderError(f"provider '{provider}': unexpected response shape")
    return _parse_message(raw)


def _route(settings: ProviderSettings) -> Route:
    return sdk_route(anthropic.AsyncAnthropic, anthropic.DefaultAioHttpClient, settings, _PATH)


class AnthropicProvider(SdkProvider[Route]):
    """`LLMProvider` for the Anthropic Messages API (and compatible endpoints)."""

    def __init__(self, settings: ProviderSettings, *, sleep: Sleep = asyncio.sleep) -> None:
        super().__init__(settings, _route(settings) if settings.api_key else None, sleep=sleep)

    async def complete(self, request: LLMRequest, on_delta: DeltaSink | None = None) -> LLMResponse:
        route = self._client_for_call()
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
            params["temperature"] = request.temperature

        if on_delta is not None:
            params["stream"] = True
        body = json.dumps(params, ensure_ascii=False, separators=(",", ":"), allow_nan=False)

        async def once(sink: DeltaSink | None) -> LLMResponse:
            try:
                if sink is None:
                    return _message_of(self.name, await route.post(self.name, body.encode()))
                return await self._stream(route, body.encode(), sink)
            except TRANSPORT_ERRORS as exc:  # HTTP statuses are classified by the route
                raise transport_failure(exc, self.name) from exc

        return await self._with_retries(once, on_delta)

    async def _stream(self, route: Route, body: bytes, sink: DeltaSink) -> LLMResponse:
        response = await route.stream(self.name, body)
        deltas = DeltaBatch(sink)
        assembler = _MessageAssembler(self.name, deltas, dict(response.headers))
        whole = await read_events(response, assembler.feed, deltas)
        if assembler.message is None:
            raise ProviderUnavailable(f"provider '{self.name}': the stream ended without a message")
        message = assembler.result()
        # the body ended before message_stop: whole only with its stop reason
        if not whole and message.get("stop_reason") is None:
            raise ProviderUnavailable(f"provider '{self.name}': {CUT_SHORT}")
        return _parse_message(message)
