"""Both providers against a server that breaks HTTP itself: every such reply
is a failed call (ProviderUnavailable, retried), never a raw library error."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from agent.messages import ChatMessage
from agent.providers import create_provider
from agent.providers.base import LLMRequest, ProviderSettings, ProviderUnavailable

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


@pytest.fixture
async def broken(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    reply = _BROKEN[request.param]

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(reply)
            await writer.drain()
        finally:
            writer.close()

    async with _serving(answer) as port:
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
