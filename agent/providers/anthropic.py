"""The Anthropic provider (Messages API, native tool use) on the official `anthropic` SDK.

The body is built by `anthropic_wire` (system blocks, the history in place,
prompt-cache breakpoints unless `prompt_cache` is off). It goes out on the
SDK client's HTTP client with the URL and headers the SDK gives it, and the
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
import ssl
from typing import Any

import anthropic
import httpx2

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
from agent.providers.route import Route, read_events
from agent.providers.sdk import CUT_SHORT, SdkProvider

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
            arguments = json.dumps(block.get("input") or {}, ensure_ascii=False)
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

    def __init__(self, provider: str, on_delta: DeltaSink) -> None:
        self._provider = provider
        self._on_delta = on_delta
        self.message: dict[str, Any] | None = None  # from message_start on
        self._blocks: dict[int, dict[str, Any]] = {}
        self._inputs: dict[int, list[str]] = {}  # a tool_use block's input JSON, in pieces

    async def feed(self, payload: str) -> bool:
        """One event; True at message_stop (the message is whole)."""
        try:
            event = _obj(json.loads(payload))
        except ValueError:
            raise ProviderUnavailable(
                f"provider '{self._provider}': stream error (an event that is not JSON)"
            ) from None
        kind = event.get("type")
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
        elif kind == "error":  # inside a 200 stream: its type says what status it means
            inner = _obj(event.get("error"))
            status = _STREAM_ERROR_STATUS.get(str(inner.get("type")), 500)
            raise classify_status(self._provider, status, {}, event)
        return False  # ping, content_block_stop, and kinds added later

    async def _delta(self, index: object, delta: dict[str, Any]) -> None:
        block = self._blocks.get(index) if isinstance(index, int) else None
        kind = delta.get("type")
        if kind == "text_delta":
            piece = str(delta.get("text") or "")
            if block is not None:
                block["text"] = str(block.get("text") or "") + piece
            if piece:
                await self._on_delta(piece)
        elif block is None:
            return
        elif kind == "input_json_delta":
            self._inputs.setdefault(index, []).append(str(delta.get("partial_json") or ""))  # type: ignore[arg-type]
        elif kind == "thinking_delta":
            block["thinking"] = str(block.get("thinking") or "") + str(delta.get("thinking") or "")

    def result(self) -> dict[str, Any]:
        """The message so far (whole after message_stop)."""
        assert self.message is not None
        for index, pieces in self._inputs.items():
            raw = "".join(pieces)
            try:
                self._blocks[index]["input"] = json.loads(raw) if raw else {}
            except ValueError:  # cut short mid-input: the loop reports bad arguments
                self._blocks[index]["input"] = raw
        self.message["content"] = [self._blocks[i] for i in sorted(self._blocks)]
        return self.message


def map_anthropic_error(exc: Exception, provider: str) -> ProviderError:
    """Translate a transport exception into the provider error tree (HTTP
    error statuses are classified where the response arrives)."""
    prefix = f"provider '{provider}'"
    if isinstance(exc, httpx2.TimeoutException | anthropic.APITimeoutError):
        return ProviderUnavailable(f"{prefix}: request timed out")
    if isinstance(exc, httpx2.TransportError | ssl.SSLError | anthropic.APIConnectionError):
        return ProviderUnavailable(f"{prefix}: connection failed ({type(exc).__name__})")
    return ProviderError(f"{prefix}: {type(exc).__name__}")


def _route(settings: ProviderSettings) -> Route:
    timeout = httpx2.Timeout(settings.timeout_secs)
    # aiohttp transport, as for OpenAI: a fraction of httpx's CPU per request
    http = anthropic.DefaultAioHttpClient(timeout=timeout)
    client = anthropic.AsyncAnthropic(
        api_key=settings.api_key,
        base_url=settings.base_url,
        default_headers=settings.extra_headers or None,
        timeout=timeout,
        max_retries=0,
        http_client=http,
    )
    return Route(client, http, _PATH, timeout)


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

        async def once(sink: DeltaSink | None) -> LLMResponse:
            body = json.dumps(
                params if sink is None else {**params, "stream": True},
                ensure_ascii=False,
                separators=(",", ":"),
            ).encode()
            try:
                if sink is None:
                    response = await route.send(self.name, body, stream=False)
                    try:
                        return _parse_message(json.loads(response.content))
                    except ValueError:
                        raise ProviderError(
                            f"provider '{self.name}': unexpected response shape"
                        ) from None
                return await self._stream(route, body, sink)
            except (httpx2.TransportError, ssl.SSLError, anthropic.AnthropicError) as exc:
                raise map_anthropic_error(exc, self.name) from exc

        return await self._with_retries(once, on_delta)

    async def _stream(self, route: Route, body: bytes, sink: DeltaSink) -> LLMResponse:
        assembler = _MessageAssembler(self.name, sink)
        response = await route.send(self.name, body, stream=True)
        whole = await read_events(response, assembler.feed)
        if assembler.message is None:
            raise ProviderUnavailable(f"provider '{self.name}': the stream ended without a message")
        message = assembler.result()
        # the body ended before message_stop: whole only with its stop reason
        if not whole and message.get("stop_reason") is None:
            raise ProviderUnavailable(f"provider '{self.name}': {CUT_SHORT}")
        return _parse_message(message)
