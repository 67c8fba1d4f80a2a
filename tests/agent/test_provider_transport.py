"""Both providers against a server that breaks HTTP itself: every such reply
is a failed call (ProviderUnavailable, retried), never a raw library error.
And against servers that reach them in ways HTTP allows: through a proxy, or
with a body in content codings."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from agent.messages import ChatMessage
from agent.providers import create_provider
from agent.providers.base import (
    LLMRequest,
    ProviderContextOverflow,
    ProviderSettings,
    ProviderUnavailable,
)

# what each server sends back, whatever was asked
_BROKEN = {
    "status line": b"HTTP/1.1 2OO OK\r\nContent-Length: 2\r\n\r\nhi",
    "content length": b"HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\nhi",
    "gzip that is not": (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Encoding: gzip\r\n"
        b"Content-Length: 15\r\n\r\nnot gzip at all"
    ),
}


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@contextlib.asynccontextmanager
async def _serving(handler: Handler) -> AsyncIterator[int]:
    """A raw TCP server on 127.0.0.1; its port."""
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


def _proxy_only(monkeypatch: pytest.MonkeyPatch, variable: str, port: int) -> None:
    """`variable` (HTTP_PROXY, HTTPS_PROXY) names the proxy, with credentials; no other does."""
    for name in ("NO_PROXY", "ALL_PROXY", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    monkeypatch.setenv(variable, f"http://who:pw@127.0.0.1:{port}")


@contextlib.asynccontextmanager
async def _answering(reply: bytes) -> AsyncIterator[int]:
    """A server that sends `reply` to whatever request comes; its port."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(reply)
            await writer.drain()
        finally:
            writer.close()

    async with _serving(answer) as port:
        yield port


@pytest.fixture
async def broken(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    async with _answering(_BROKEN[request.param]) as port:
        yield f"http://127.0.0.1:{port}"


async def _discard(_: str) -> None:
    pass


@pytest.mark.parametrize("broken", sorted(_BROKEN), indirect=True)
@pytest.mark.parametrize("kind", ["openai", "anthropic"])
@pytest.mark.parametrize("stream", [False, True])
async def test_a_broken_http_reply_is_a_failed_call(broken: str, kind: str, stream: bool) -> None:
    base_url = f"{broken}/v1" if kind == "openai" else broken
    settings = ProviderSettings(
        name="p", api_key="sk-test-secret", base_url=base_url, max_retries=0
    )
    provider = create_provider(kind, settings)
    request = LLMRequest(model="m", messages=[ChatMessage.user("hi")])
    try:
        with pytest.raises(ProviderUnavailable, match="connection failed") as caught:
            await provider.complete(request, _discard if stream else None)
    finally:
        await provider.aclose()
    assert "sk-test-secret" not in str(caught.value)


_ANSWERS = {
    "openai": {"choices": [{"message": {"role": "assistant", "content": "via proxy"}}]},
    "anthropic": {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": "via proxy"}],
        "stop_reason": "end_turn",
    },
}


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_a_proxy_the_environment_names_carries_the_request(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the SDK's HTTP client would (httpx reads HTTP(S)_PROXY): the request
    goes to the proxy, in absolute form, with the proxy's credentials."""
    seen: list[tuple[bytes, bytes]] = []
    answer = json.dumps(_ANSWERS[kind]).encode()

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            await reader.readexactly(length)
            auth = [h for h in head.split(b"\r\n") if h.lower().startswith(b"proxy-authorization:")]
            seen.append((head.split(b"\r\n", 1)[0], auth[0] if auth else b""))
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(answer), answer)
            )
            await writer.drain()
        finally:
            writer.close()

    base_url = "http://llm.invalid/v1" if kind == "openai" else "http://llm.invalid"
    settings = ProviderSettings(name="p", api_key="sk-test-secret", base_url=base_url)
    async with _serving(proxy) as port:
        _proxy_only(monkeypatch, "HTTP_PROXY", port)
        provider = create_provider(kind, settings)
        try:
            reply = await provider.complete(
                LLMRequest(model="m", messages=[ChatMessage.user("hi")])
            )
        finally:
            await provider.aclose()
    assert reply.content == "via proxy"
    path = "/v1/chat/completions" if kind == "openai" else "/v1/messages"
    assert seen == [
        (f"POST http://llm.invalid{path} HTTP/1.1".encode(), b"Proxy-Authorization: Basic d2hvOnB3")
    ]


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_a_tls_service_behind_a_proxy_is_tunnelled_with_its_credentials(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HTTPS through the proxy: a CONNECT carrying the proxy's credentials
    (this proxy refuses it: a failed call, retried, no key in the error)."""
    seen: list[bytes] = []

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            seen.append(await reader.readuntil(b"\r\n\r\n"))
            writer.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            await writer.drain()
        finally:
            writer.close()

    settings = ProviderSettings(
        name="p", api_key="sk-test-secret", base_url="https://llm.invalid/v1", max_retries=0
    )
    async with _serving(proxy) as port:
        _proxy_only(monkeypatch, "HTTPS_PROXY", port)
        provider = create_provider(kind, settings)
        try:
            with pytest.raises(ProviderUnavailable, match="connection failed") as caught:
                await provider.complete(LLMRequest(model="m", messages=[ChatMessage.user("hi")]))
        finally:
            await provider.aclose()
    assert "sk-test-secret" not in str(caught.value)
    (connect,) = seen
    assert connect.startswith(b"CONNECT llm.invalid:443 HTTP/1.1\r\n")
    assert b"\r\nProxy-Authorization: Basic d2hvOnB3\r\n" in connect
    assert b"sk-test-secret" not in connect  # the key goes only inside the tunnel


_STREAMS = {  # the same answer, streamed
    "openai": [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "via "}}]},
        {"choices": [{"index": 0, "delta": {"content": "codings"}, "finish_reason": "stop"}]},
        "[DONE]",
    ],
    "anthropic": [
        {
            "type": "message_start",
            "message": {"type": "message", "role": "assistant", "content": []},
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "via "},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "codings"},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
        {"type": "message_stop"},
    ],
}

# the Content-Encoding headers, and the codings they say were applied, in order
_CODINGS = {
    "one coding": (["gzip"], ["gzip"]),
    "a list with identity": (["gzip, identity"], ["gzip"]),
    "two codings in one header": (["deflate, gzip"], ["deflate", "gzip"]),
    "a header repeated": (["gzip", "gzip"], ["gzip", "gzip"]),
}
_CODE = {"gzip": gzip.compress, "deflate": zlib.compress}


def _body(kind: str, streamed: bool) -> bytes:
    if not streamed:
        return json.dumps(_ANSWERS[kind]).encode()
    events = []
    for event in _STREAMS[kind]:
        data = event if isinstance(event, str) else json.dumps(event)
        name = (
            f"event: {event['type']}\n" if isinstance(event, dict) and kind == "anthropic" else ""
        )
        events.append(f"{name}data: {data}\n\n")
    return "".join(events).encode()


def _coded_reply(status: int, body: bytes, headers: list[str], codings: list[str]) -> bytes:
    for coding in codings:
        body = _CODE[coding](body)
    head = [
        f"HTTP/1.1 {status} X",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
    ]
    head += [f"Content-Encoding: {value}" for value in headers]
    head.append("X-Served-By: café-1")  # not ASCII (httpx refuses such a value of its own)
    return "\r\n".join([*head, "", ""]).encode() + body


def _base_url(kind: str, port: int) -> str:
    return f"http://127.0.0.1:{port}/v1" if kind == "openai" else f"http://127.0.0.1:{port}"


@pytest.mark.parametrize("coded", sorted(_CODINGS))
@pytest.mark.parametrize("kind", ["openai", "anthropic"])
@pytest.mark.parametrize("streamed", [False, True])
async def test_a_body_in_content_codings_is_decoded_as_the_sdk_decodes_it(
    coded: str, kind: str, streamed: bool
) -> None:
    """As httpx decodes it: every coding each Content-Encoding header lists,
    the last applied first (aiohttp alone would decode one coding alone)."""
    headers, codings = _CODINGS[coded]
    shown: list[str] = []

    async def sink(text: str) -> None:
        shown.append(text)

    reply = _coded_reply(200, _body(kind, streamed), headers, codings)
    async with _answering(reply) as port:
        settings = ProviderSettings(name="p", api_key="sk-test", base_url=_base_url(kind, port))
        provider = create_provider(kind, settings)
        try:
            request = LLMRequest(model="m", messages=[ChatMessage.user("hi")])
            answer = await provider.complete(request, sink if streamed else None)
        finally:
            await provider.aclose()
    expected = "via codings" if streamed else "via proxy"
    assert answer.content == expected
    assert "".join(shown) == (expected if streamed else "")


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_a_refusal_in_content_codings_is_read_for_what_it_says(kind: str) -> None:
    """A 400 whose body is coded still says the prompt was too long: the
    session is compacted and the call tried again, not refused."""
    error = {"error": {"type": "invalid_request_error", "message": "prompt is too long"}}
    reply = _coded_reply(400, json.dumps(error).encode(), ["gzip, identity"], ["gzip"])
    async with _answering(reply) as port:
        settings = ProviderSettings(
            name="p", api_key="sk-test", base_url=_base_url(kind, port), max_retries=0
        )
        provider = create_provider(kind, settings)
        try:
            with pytest.raises(ProviderContextOverflow):
                await provider.complete(LLMRequest(model="m", messages=[ChatMessage.user("hi")]))
        finally:
            await provider.aclose()


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_an_event_json_reads_and_orjson_refuses_is_read_as_before(kind: str) -> None:
    """Events are read by orjson; one it refuses and json takes (a lone
    surrogate escape, a `NaN`) is read by json, as it was before."""
    body = _body(kind, True).replace(b'"via "', b'"via \\ud800", "n": NaN', 1)
    assert b'"via \\ud800", "n": NaN' in body
    shown: list[str] = []

    async def sink(text: str) -> None:
        shown.append(text)

    async with _answering(_coded_reply(200, body, [], [])) as port:
        settings = ProviderSettings(name="p", api_key="sk-test", base_url=_base_url(kind, port))
        provider = create_provider(kind, settings)
        try:
            request = LLMRequest(model="m", messages=[ChatMessage.user("hi")])
            answer = await provider.complete(request, sink)
        finally:
            await provider.aclose()
    assert answer.content == "".join(shown) == "via \ufffdcodings"  # the half replaced
