"""Both providers against a server that breaks HTTP itself: every such reply
is a failed call (ProviderUnavailable, retried), never a raw library error."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

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

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.close()
        await server.wait_closed()


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
