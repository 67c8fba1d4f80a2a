"""The OpenAI Chat Completions wire format, as picobot's API speaks it
(docs/api.md): what a request may carry, and the response, chunk and error
bodies, in the shapes the official SDKs parse.

Only what picobot can honour is accepted: the new user message (the last
`user` message of `messages`; earlier ones are the client's copy of a history
picobot keeps itself), `model` naming an agent (`picobot/<agent>`, or
`picobot` for the channel's), `stream` and `stream_options.include_usage`,
and `user`. Client-side `tools` are refused: picobot runs its own.
Sampling fields (temperature, max_tokens …) are accepted and ignored: the
agent's configuration decides them.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from aiohttp import web

__all__ = [
    "DEFAULT_MODEL",
    "ApiRequest",
    "BadRequest",
    "chunk",
    "completion",
    "error_body",
    "model_id",
    "models_body",
    "parse_request",
    "read_body",
]

DEFAULT_MODEL = "picobot"  # the channel's agent
_PREFIX = "picobot/"
_SESSION = re.compile(r"^[A-Za-z0-9._:@-]{1,64}$")


class BadRequest(ValueError):
    """A request picobot refuses: `status` (400 by default) with this message
    (`param`: the field; `code`, `kind`: the error body's)."""

    def __init__(
        self,
        message: str,
        param: str | None = None,
        status: int = 400,
        *,
        code: str | None = None,
        kind: str = "invalid_request_error",
    ) -> None:
        super().__init__(message)
        self.param = param
        self.status = status
        self.code = code
        self.kind = kind


@dataclass(frozen=True, slots=True)
class ApiRequest:
    text: str
    model: str  # as the client named it, echoed back
    agent: str | None  # None: the channel's agent
    stream: bool
    include_usage: bool
    user: str | None


def model_id(agent: str) -> str:
    return f"{_PREFIX}{agent}"


def check_session(value: str, where: str) -> str:
    if not _SESSION.fullmatch(value):
        raise BadRequest(f"{where} must be 1-64 characters of letters, digits and . _ : @ -", where)
    return value


def _text_of(content: Any) -> str:
    """A message's text: a string, or the text parts of a content array."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text":
                raise BadRequest(
                    "only text content parts are accepted (images: send them in a chat channel)",
                    "messages",
                )
            text = part.get("text")
            if not isinstance(text, str):
                raise BadRequest("a text part needs a string 'text'", "messages")
            parts.append(text)
        return "\n".join(parts)
    raise BadRequest("a message's content must be a string or text parts", "messages")


def parse_request(body: Any, agents: frozenset[str]) -> ApiRequest:
    """Raises BadRequest (400, or 404 for an unknown model)."""
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    if body.get("tools") or body.get("functions"):
        raise BadRequest(
            "client-side tools are not supported: picobot runs its own tools "
            "(docs/api.md); send the request without 'tools'",
            "tools",
        )
    if body.get("n") not in (None, 1):
        raise BadRequest("only n=1 is supported", "n")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty array", "messages")
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    if not users:
        raise BadRequest("'messages' has no user message to answer", "messages")
    text = _text_of(users[-1].get("content"))
    if not text.strip():
        raise BadRequest("the last user message is empty", "messages")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("'model' must be a string, e.g. 'picobot'", "model")
    agent: str | None = None
    if model != DEFAULT_MODEL:
        agent = model.removeprefix(_PREFIX)
        if not model.startswith(_PREFIX) or agent not in agents:
            raise BadRequest(
                f"no model {model!r}: GET /v1/models lists them ('picobot' or 'picobot/<agent>')",
                "model",
                status=404,
            )
    stream = body.get("stream") is True
    options = body.get("stream_options")
    include_usage = isinstance(options, dict) and options.get("include_usage") is True
    user = body.get("user")
    if user is not None and not isinstance(user, str):
        raise BadRequest("'user' must be a string", "user")
    return ApiRequest(text, model, agent, stream, include_usage, user or None)


def _usage(usage: tuple[int, int] | None) -> dict[str, int]:
    prompt, completion_tokens = usage or (0, 0)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt + completion_tokens,
    }


def completion(
    response_id: str, model: str, text: str, usage: tuple[int, int] | None
) -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": _usage(usage),
    }


def chunk(
    response_id: str,
    model: str,
    *,
    text: str | None = None,
    role: bool = False,
    finish: bool = False,
    usage: tuple[int, int] | None = None,
    usage_chunk: bool = False,
) -> dict[str, Any]:
    """One `chat.completion.chunk`: a delta (`role` on the first), the
    finishing one, or (`usage_chunk`) the usage one with no choices."""
    body: dict[str, Any] = {
        "id": response_id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }
    if usage_chunk:
        body["choices"] = []
        body["usage"] = _usage(usage)
        return body
    delta: dict[str, Any] = {}
    if role:
        delta["role"] = "assistant"
    if text is not None:
        delta["content"] = text
    body["choices"] = [
        {"index": 0, "delta": delta, "finish_reason": "stop" if finish else None, "logprobs": None}
    ]
    return body


def error_body(
    message: str, kind: str, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def models_body(agents: list[str]) -> dict[str, Any]:
    created = int(time.time())
    ids = [DEFAULT_MODEL, *(model_id(a) for a in agents)]
    return {
        "object": "list",
        "data": [
            {"id": i, "object": "model", "created": created, "owned_by": "picobot"} for i in ids
        ],
    }


async def read_body(request: web.Request, limit: int) -> bytes:
    """The whole body, refused (413) past `limit` bytes before it is all read."""
    if (request.content_length or 0) > limit:
        raise BadRequest("the request is too large", status=413)
    chunks, size = [], 0
    async for data in request.content.iter_chunked(65_536):
        size += len(data)
        if size > limit:
            raise BadRequest("the request is too large", status=413)
        chunks.append(data)
    return b"".join(chunks)
