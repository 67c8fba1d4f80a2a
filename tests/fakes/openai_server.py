"""A fake OpenAI chat-completions server for tests, plus the script machinery it shares.

`FakeOpenAI` is an aiohttp app on 127.0.0.1 port 0 speaking POST /v1/chat/completions
as OpenAI does: JSON responses, or SSE chunks ending in `data: [DONE]` when the
request sets "stream": true (text in >= 3 deltas, tool calls as index/id/name and
argument fragments, usage in a final chunk when stream_options.include_usage).
Replies come from a script (`add_text`, `add_tool_call`, `add_error`, ...), a
`responder` hook, or default to "echo: <last user text>". `ScriptedLLMServer` holds
what FakeAnthropic reuses: the script, the hold/release gate, request recording and
the API-key check. Nothing here ever leaves loopback.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Self

from aiohttp import web
from multidict import CIMultiDict

from tests.fakes.prompt_cache import OpenAICache

__all__ = [
    "FakeOpenAI",
    "Reply",
    "ScriptedLLMServer",
    "ScriptedToolCall",
    "ShownPace",
    "last_user_text",
    "split_text",
]


@dataclass(frozen=True, slots=True)
class ScriptedToolCall:
    name: str
    arguments: dict[str, Any] | str  # a str goes out as it is: the model's text, JSON or not
    call_id: str | None = None


@dataclass(frozen=True, slots=True)
class Reply:
    """One scripted answer: text and/or tool calls, or an HTTP error when `status` != 200."""

    text: str = ""
    reasoning: str | None = None
    tool_calls: tuple[ScriptedToolCall, ...] = ()
    status: int = 200
    body: Any = None  # error body (JSON-able); None means the provider's standard error JSON
    headers: dict[str, str] = field(default_factory=dict)
    usage: tuple[int, int] | None = None  # (input, output); None means counted from words
    stream_error: str | None = None  # streaming only: fail with this message after the text
    chunk_delay: float = 0.0  # streaming only: seconds between chunks (a model's pace)
    # streaming only: awaited after each chunk that carries text (a test's own
    # pace, e.g. until the client has shown that text)
    after_text: Callable[[str], Awaitable[None]] | None = None
    # streaming only: the body ends cleanly right after the text, with no
    # finish and no end marker (a proxy that cut the stream short)
    cut_short: bool = False

    @property
    def is_error(self) -> bool:
        return self.status != 200


Responder = Callable[[dict[str, Any]], Awaitable[Reply | None]]


class ShownPace:
    """A delta sink that keeps what was shown, and a pace for `Reply.after_text`
    that waits until the text just sent was shown: each piece a read of its own."""

    def __init__(self) -> None:
        self.shown: list[str] = []
        self._event = asyncio.Event()

    async def sink(self, text: str) -> None:
        self.shown.append(text)
        self._event.set()

    async def until_shown(self, _: str) -> None:
        async with asyncio.timeout(5):  # never shown: the stream breaks, the test fails
            await self._event.wait()
        self._event.clear()


def event_data(item: Any) -> str:
    """One event's JSON as a service writes it: UTF-8, and a lone surrogate
    (half of a pair a service whose strings are UTF-16 cut in two, or sent
    alone) as an escape, as JavaScript's JSON.stringify writes one."""
    data = json.dumps(item, ensure_ascii=False)
    try:
        data.encode()
    except UnicodeEncodeError:
        return json.dumps(item)
    return data


def split_text(text: str, parts: int = 3) -> list[str]:
    """Split text into at least `parts` non-empty chunks (fewer only if it is shorter)."""
    words = re.findall(r"\S+\s*|\s+", text)
    if len(words) >= parts:
        return words
    size = max(1, -(-len(text) // parts))
    return [text[i : i + size] for i in range(0, len(text), size)]


_NOT_COUNTED = {"role", "type", "id", "tool_call_id", "tool_use_id", "url", "data", "media_type"}


def count_words(value: Any) -> int:
    """A deterministic stand-in for token counting: words in the text inside `value`."""
    if isinstance(value, str):
        return len(value.split())
    if isinstance(value, dict):
        return sum(count_words(v) for k, v in value.items() if k not in _NOT_COUNTED)
    if isinstance(value, list):
        return sum(count_words(v) for v in value)
    return 0


class ScriptedLLMServer:
    """Base fake: subclasses add routes and render `Reply` objects in their wire format."""

    def __init__(self) -> None:
        self.api_key: str | None = None
        self.delay: float = 0.0
        self.responder: Responder | None = None
        self.requests: list[dict[str, Any]] = []
        # each answered request with the usage reported for it
        self.billed: list[tuple[dict[str, Any], dict[str, Any]]] = []
        self.request_headers: list[CIMultiDict[str]] = []  # case-insensitive keys
        self.peers: list[object] = []  # each request's client address: a new one, a new connection
        self._script: deque[Reply] = deque()
        self._gate = asyncio.Event()
        self._gate.set()
        self._arrived = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self._port = 0
        self._closed = False

    # -- lifecycle -----------------------------------------------------------------

    def _routes(self, app: web.Application) -> None:
        raise NotImplementedError

    @property
    def url(self) -> str:
        if not self._port:
            raise RuntimeError("fake server not started")
        return f"http://127.0.0.1:{self._port}"

    async def start(self) -> None:
        if self._runner is not None or self._closed:
            raise RuntimeError("fake server already started or closed")
        app = web.Application()
        self._routes(app)
        runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self._runner = runner
        self._port = runner.addresses[0][1]

    async def close(self) -> None:
        self._closed = True
        self._gate.set()  # let held handlers finish so shutdown does not hang
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # -- scripting -----------------------------------------------------------------

    def add_reply(self, reply: Reply) -> None:
        self._script.append(reply)

    def add_text(
        self, text: str, *, reasoning: str | None = None, usage: tuple[int, int] | None = None
    ) -> None:
        self.add_reply(Reply(text=text, reasoning=reasoning, usage=usage))

    def add_tool_call(
        self,
        name: str,
        arguments: dict[str, Any] | str,
        *,
        call_id: str | None = None,
        text: str = "",
        reasoning: str | None = None,
    ) -> None:
        call = ScriptedToolCall(name, arguments, call_id)
        self.add_reply(Reply(text=text, reasoning=reasoning, tool_calls=(call,)))

    def add_tool_calls(
        self,
        calls: list[tuple[str, dict[str, Any]]],
        *,
        text: str = "",
        reasoning: str | None = None,
    ) -> None:
        scripted = tuple(ScriptedToolCall(name, args) for name, args in calls)
        self.add_reply(Reply(text=text, reasoning=reasoning, tool_calls=scripted))

    def add_error(
        self, status: int, body: Any = None, headers: dict[str, str] | None = None
    ) -> None:
        self.add_reply(Reply(status=status, body=body, headers=dict(headers or {})))

    @property
    def pending(self) -> int:
        """Scripted replies not yet consumed."""
        return len(self._script)

    def hold(self) -> None:
        """Make every request wait (after it is recorded) until `release()`."""
        self._gate.clear()

    def release(self) -> None:
        self._gate.set()

    async def wait_requests(self, n: int, timeout: float = 5.0) -> list[dict[str, Any]]:
        async with asyncio.timeout(timeout), self._arrived:
            await self._arrived.wait_for(lambda: len(self.requests) >= n)
        return self.requests

    # -- request handling helpers for subclasses -------------------------------------

    async def _record(self, request: web.Request) -> dict[str, Any]:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            body = None
        if not isinstance(body, dict):
            raise web.HTTPBadRequest(text="body must be a JSON object")
        async with self._arrived:
            self.requests.append(body)
            self.request_headers.append(CIMultiDict(request.headers))
            self.peers.append(request.transport and request.transport.get_extra_info("peername"))
            self._arrived.notify_all()
        return body

    async def _next_reply(self, body: dict[str, Any], default_text: str) -> Reply:
        reply: Reply | None = None
        if self.responder is not None:
            reply = await self.responder(body)
        if reply is None and self._script:
            reply = self._script.popleft()
        if reply is None:
            reply = Reply(text=f"echo: {default_text}")
        if self.delay:
            await asyncio.sleep(self.delay)
        await self._gate.wait()
        return reply

    @staticmethod
    def _usage_of(reply: Reply, body: dict[str, Any]) -> tuple[int, int]:
        if reply.usage is not None:
            return reply.usage
        produced = count_words(reply.text) + sum(count_words(c.arguments) for c in reply.tool_calls)
        return count_words(body.get("messages", [])) + count_words(body.get("system", "")), produced


def last_user_text(messages: list[Any]) -> str:
    """Text of the last user message, whether its content is a string or a list of parts."""
    for message in reversed(messages):
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            texts = [
                part.get("text", "")
                for part in content
                if isinstance(part, dict) and part.get("type") == "text"
            ]
            if texts:
                return "\n".join(texts)
    return ""


_ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("permission_denied", None),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
}


def openai_error_body(status: int, message: str | None = None) -> dict[str, Any]:
    kind, code = _ERROR_TYPES.get(status, ("server_error", None))
    text = message or f"fake error {status}"
    return {"error": {"message": text, "type": kind, "param": None, "code": code}}


def _text_of(chunk: dict[str, Any]) -> str:
    choices = chunk.get("choices") or [{}]
    return str(choices[0].get("delta", {}).get("content") or "")


class FakeOpenAI(ScriptedLLMServer):
    """POST /v1/chat/completions (and GET /v1/models) the way OpenAI answers them.

    Prompt caching is emulated (tests/fakes/prompt_cache.py) and reported in
    `usage.prompt_tokens_details.cached_tokens`. With `accepted_fields` set it
    behaves like the OpenAI-compatible servers that refuse a request carrying
    any other top-level field (400)."""

    _ids = itertools.count(1)

    def __init__(
        self,
        *,
        prompt_cache: OpenAICache | None = None,
        accepted_fields: frozenset[str] | None = None,
    ) -> None:
        super().__init__()
        self.prompt_cache = prompt_cache or OpenAICache()
        self.accepted_fields = accepted_fields
        # POST /v1/audio/transcriptions: audio bytes -> the text answered for them
        self.transcripts: dict[bytes, str] = {}
        self.transcription_requests: list[tuple[str, str, bytes]] = []  # (model, name, bytes)

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def _routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", self._completions)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/audio/transcriptions", self._transcriptions)

    def _authorized(self, request: web.Request) -> bool:
        return self.api_key is None or request.headers.get("Authorization") == (
            f"Bearer {self.api_key}"
        )

    def _unauthorized(self) -> web.Response:
        body = openai_error_body(401, "Incorrect API key provided.")
        return web.json_response(body, status=401)

    async def _transcriptions(self, request: web.Request) -> web.Response:
        """OpenAI's speech-to-text: multipart `file` and `model` → {"text"}."""
        if not self._authorized(request):
            return self._unauthorized()
        form = await request.post()
        upload, model = form.get("file"), form.get("model")
        if upload is None or isinstance(upload, str) or not isinstance(model, str) or not model:
            body = openai_error_body(400, "'file' and 'model' are required")
            return web.json_response(body, status=400)
        data = upload.file.read()
        self.transcription_requests.append((model, str(upload.filename), data))
        text = self.transcripts.get(data)
        if text is None:
            return web.json_response(openai_error_body(400, "audio not understood"), status=400)
        return web.json_response({"text": text})

    async def _models(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._unauthorized()
        model = {"id": "fake-model", "object": "model", "created": 0, "owned_by": "fake"}
        return web.json_response({"object": "list", "data": [model]})

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        body = await self._record(request)
        if not self._authorized(request):
            return self._unauthorized()
        unknown = sorted(set(body) - self.accepted_fields) if self.accepted_fields else []
        if unknown:
            text = f"Unrecognized request argument supplied: {', '.join(unknown)}"
            return web.json_response(openai_error_body(400, text), status=400)
        reply = await self._next_reply(body, last_user_text(body.get("messages", [])))
        if reply.is_error:
            payload = reply.body if reply.body is not None else openai_error_body(reply.status)
            return web.json_response(payload, status=reply.status, headers=reply.headers)
        usage = self._usage(body, reply)
        self.billed.append((body, usage))
        if body.get("stream"):
            return await self._stream(request, body, reply, usage)
        return web.json_response(self._completion(body, reply, usage))

    @staticmethod
    def _tool_calls(reply: Reply) -> list[dict[str, Any]]:
        return [
            {
                "id": call.call_id or f"call_{next(FakeOpenAI._ids):06d}",
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": call.arguments
                    if isinstance(call.arguments, str)
                    else json.dumps(call.arguments, ensure_ascii=False),
                },
            }
            for call in reply.tool_calls
        ]

    def _usage(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        """Scripted usage as given; else counted words (tool definitions
        included), the cached prefix among them."""
        if reply.usage is not None:
            (prompt, completion), cached = reply.usage, 0
        else:
            prompt = len(OpenAICache.prompt_tokens(body))
            completion = self._usage_of(reply, body)[1]
            cached = self.prompt_cache.cached_tokens(body)
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        }

    def _completion(
        self, body: dict[str, Any], reply: Reply, usage: dict[str, Any]
    ) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": reply.text or None,
            "refusal": None,
        }
        if reply.tool_calls:
            message["tool_calls"] = self._tool_calls(reply)
        if reply.reasoning is not None:
            message["reasoning_content"] = reply.reasoning
        return {
            "id": f"chatcmpl-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "fake-model"),
            "system_fingerprint": "fp_fake",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": "tool_calls" if reply.tool_calls else "stop",
                }
            ],
            "usage": usage,
        }

    def _chunks(
        self, body: dict[str, Any], reply: Reply, usage: dict[str, Any]
    ) -> list[dict[str, Any]]:
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        base: dict[str, Any] = {
            "id": f"chatcmpl-{next(self._ids)}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body.get("model", "fake-model"),
            "system_fingerprint": "fp_fake",
        }
        if include_usage:
            base["usage"] = None

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            return {**base, "choices": [choice]}

        chunks = [chunk({"role": "assistant", "content": "", "refusal": None})]
        for piece in split_text(reply.reasoning or ""):
            chunks.append(chunk({"content": None, "reasoning_content": piece}))
        for piece in split_text(reply.text):
            chunks.append(chunk({"content": piece}))
        if reply.stream_error is not None or reply.cut_short:
            return chunks
        for index, call in enumerate(self._tool_calls(reply)):
            head = {
                "index": index,
                "id": call["id"],
                "type": "function",
                "function": {"name": call["function"]["name"], "arguments": ""},
            }
            chunks.append(chunk({"tool_calls": [head]}))
            for fragment in split_text(call["function"]["arguments"]):
                part = {"index": index, "function": {"arguments": fragment}}
                chunks.append(chunk({"tool_calls": [part]}))
        chunks.append(chunk({}, "tool_calls" if reply.tool_calls else "stop"))
        if include_usage:
            chunks.append({**base, "choices": [], "usage": usage})
        return chunks

    async def _stream(
        self, request: web.Request, body: dict[str, Any], reply: Reply, usage: dict[str, Any]
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream; charset=utf-8",
                "Cache-Control": "no-cache",
            }
        )
        await response.prepare(request)
        try:
            for n, item in enumerate(self._chunks(body, reply, usage)):
                if n and reply.chunk_delay:
                    await asyncio.sleep(reply.chunk_delay)  # the model's pace, not a wait
                await response.write(f"data: {event_data(item)}\n\n".encode())
                text = _text_of(item)
                if text and reply.after_text is not None:
                    await reply.after_text(text)
            if reply.stream_error is not None:
                error = openai_error_body(500, reply.stream_error)
                await response.write(f"data: {json.dumps(error)}\n\n".encode())
            elif not reply.cut_short:
                await response.write(b"data: [DONE]\n\n")
            await response.write_eof()
        except ConnectionResetError:
            pass  # the client went away mid-stream (cancelled turn); nothing to clean up
        return response
