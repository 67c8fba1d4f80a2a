"""A fake Anthropic Messages API server for tests.

`FakeAnthropic` is an aiohttp app on 127.0.0.1 port 0 speaking POST /v1/messages as
Anthropic does: a JSON message, or (when "stream": true) the SSE sequence
message_start, content_block_start/delta/stop (text_delta, thinking_delta +
signature_delta, tool_use with input_json_delta), message_delta, message_stop. It
checks the key (`x-api-key`, or `Authorization: Bearer` as anthropic SDK 2.x
sends it) when `api_key` is set and requires the `anthropic-version`
header. Scripting and recording are shared with FakeOpenAI (`ScriptedLLMServer`).
Prompt caching is emulated as the service describes it (`prompt_cache`, see
tests/fakes/prompt_cache.py): usage reports `cache_read_input_tokens` and
`cache_creation_input_tokens`, and a request with more than four
`cache_control` breakpoints is refused with a 400. Nothing here ever leaves loopback.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

from aiohttp import web

from tests.fakes.openai_server import (
    Reply,
    ScriptedLLMServer,
    event_data,
    last_user_text,
    split_text,
)
from tests.fakes.prompt_cache import AnthropicCache, CacheRequestError

__all__ = ["FakeAnthropic", "anthropic_error_body"]

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def anthropic_error_body(status: int, message: str | None = None) -> dict[str, Any]:
    kind = _ERROR_TYPES.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message or f"fake {kind}"}}


class FakeAnthropic(ScriptedLLMServer):
    """POST /v1/messages the way Anthropic answers it."""

    _ids = itertools.count(1)

    def __init__(self, *, prompt_cache: AnthropicCache | None = None) -> None:
        super().__init__()
        self.prompt_cache = prompt_cache or AnthropicCache()
        # when set: a stream's body is ended only once this is set (a server
        # that holds the response open after message_stop)
        self.hold_open: asyncio.Event | None = None
        # SSE comment bytes sent after a stream's last event (its end then
        # comes pieces later)
        self.trailing_comment_bytes = 0
        self.empty_stream = False  # a stream of no events at all (a broken proxy)

    @property
    def base_url(self) -> str:
        """What `AsyncAnthropic(base_url=...)` takes: the host, without /v1."""
        return self.url

    def _routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/messages", self._messages)

    def _authorized(self, request: web.Request) -> bool:
        # The classic header is x-api-key; anthropic SDK 2.x sends the key as a Bearer token.
        if self.api_key is None:
            return True
        headers = request.headers
        return self.api_key in (
            headers.get("x-api-key"),
            headers.get("Authorization", "").removeprefix("Bearer "),
        )

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        body = await self._record(request)
        if not self._authorized(request):
            payload = anthropic_error_body(401, "invalid x-api-key")
            return web.json_response(payload, status=401)
        if "anthropic-version" not in request.headers:
            payload = anthropic_error_body(400, "anthropic-version header is required")
            return web.json_response(payload, status=400)
        if not isinstance(body.get("max_tokens"), int):
            payload = anthropic_error_body(400, "max_tokens: Field required")
            return web.json_response(payload, status=400)
        try:
            self.prompt_cache.validate(body)
        except CacheRequestError as exc:
            return web.json_response(anthropic_error_body(400, str(exc)), status=400)
        reply = await self._next_reply(body, last_user_text(body.get("messages", [])))
        if reply.is_error:
            payload = reply.body if reply.body is not None else anthropic_error_body(reply.status)
            return web.json_response(payload, status=reply.status, headers=reply.headers)
        usage = self._usage(body, reply)
        self.billed.append((body, usage))
        if body.get("stream"):
            return await self._stream(request, body, reply, usage)
        return web.json_response(self._message(body, reply, usage))

    def _usage(self, body: dict[str, Any], reply: Reply) -> dict[str, int]:
        """Scripted usage as given; else counted words, split by the prompt cache."""
        if reply.usage is not None:
            return {"input_tokens": reply.usage[0], "output_tokens": reply.usage[1]}
        return {**self.prompt_cache.usage(body), "output_tokens": self._usage_of(reply, body)[1]}

    @staticmethod
    def _blocks(reply: Reply) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        if reply.reasoning is not None:
            blocks.append({"type": "thinking", "thinking": reply.reasoning, "signature": "sig"})
        if reply.text:
            blocks.append({"type": "text", "text": reply.text})
        for call in reply.tool_calls:
            call_id = call.call_id or f"toolu_{next(FakeAnthropic._ids):06d}"
            blocks.append(
                {"type": "tool_use", "id": call_id, "name": call.name, "input": call.arguments}
            )
        return blocks

    def _envelope(self, body: dict[str, Any], usage: dict[str, int]) -> dict[str, Any]:
        return {
            "id": f"msg_{next(self._ids):06d}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "claude-fake"),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {**usage, "output_tokens": 1},
        }

    def _message(self, body: dict[str, Any], reply: Reply, usage: dict[str, int]) -> dict[str, Any]:
        message = self._envelope(body, usage)
        message["content"] = [_whole_input(block) for block in self._blocks(reply)]
        message["stop_reason"] = "tool_use" if reply.tool_calls else "end_turn"
        message["usage"] = usage
        return message

    def _events(
        self, body: dict[str, Any], reply: Reply, usage: dict[str, int]
    ) -> list[tuple[str, dict[str, Any]]]:
        opening = {"type": "message_start", "message": self._envelope(body, usage)}
        events: list[tuple[str, dict[str, Any]]] = [
            ("message_start", opening),
            ("ping", {"type": "ping"}),
        ]
        for index, block in enumerate(self._blocks(reply)):
            kind = block["type"]
            if kind == "text":
                start: dict[str, Any] = {"type": "text", "text": ""}
                deltas = [{"type": "text_delta", "text": p} for p in split_text(block["text"])]
            elif kind == "thinking":
                start = {"type": "thinking", "thinking": ""}
                deltas = [
                    {"type": "thinking_delta", "thinking": p} for p in split_text(block["thinking"])
                ]
                deltas.append({"type": "signature_delta", "signature": block["signature"]})
            else:
                start = {**block, "input": {}}
                given = block["input"]  # a str: the model's input JSON as it streams
                raw = given if isinstance(given, str) else json.dumps(given, ensure_ascii=False)
                deltas = [{"type": "input_json_delta", "partial_json": p} for p in split_text(raw)]
            events.append(
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": start},
                )
            )
            events += [
                ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
                for d in deltas
            ]
            if kind == "text" and reply.stream_error is not None:
                return events
            events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        if reply.cut_short:  # the last block's deltas, then nothing: no stop reason
            return events[:-1] if events[-1][0] == "content_block_stop" else events
        completion = usage["output_tokens"]
        stop = "tool_use" if reply.tool_calls else "end_turn"
        events.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": completion},
                },
            )
        )
        events.append(("message_stop", {"type": "message_stop"}))
        return events

    async def _stream(
        self, request: web.Request, body: dict[str, Any], reply: Reply, usage: dict[str, int]
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream; charset=utf-8",
                "Cache-Control": "no-cache",
            }
        )
        await response.prepare(request)
        events = [] if self.empty_stream else self._events(body, reply, usage)
        if reply.stream_error is not None:
            events.append(("error", anthropic_error_body(529, reply.stream_error)))
        try:
            for name, data in events:
                frame = f"event: {name}\ndata: {event_data(data)}\n\n"
                await response.write(frame.encode())
                text = data.get("delta", {}).get("text") if name == "content_block_delta" else None
                if text and reply.after_text is not None:
                    await reply.after_text(text)
            if self.hold_open is not None:
                await self.hold_open.wait()
            if self.trailing_comment_bytes:
                await response.write(b": " + b"x" * self.trailing_comment_bytes + b"\n\n")
            await response.write_eof()
        except ConnectionResetError:
            pass  # the client went away mid-stream (cancelled turn); nothing to clean up
        return response


def _whole_input(block: dict[str, Any]) -> dict[str, Any]:
    """A whole message carries a tool's input as an object, as the API does:
    input scripted as text is read (half a surrogate pair in it goes out as
    json writes it, an escape). Text json cannot read stays text, which the
    API never sends."""
    given = block.get("input")
    if block["type"] != "tool_use" or not isinstance(given, str):
        return block
    try:
        return {**block, "input": json.loads(given)}
    except (ValueError, RecursionError):
        return block
