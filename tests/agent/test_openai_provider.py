"""OpenAIProvider through the real `openai` SDK against FakeOpenAI on loopback."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import openai
import pytest
from aiohttp import web

from agent.messages import ChatMessage, Role, ToolCall, Usage
from agent.providers import create_provider
from agent.providers.base import (
    LLMRequest,
    ProviderAuthError,
    ProviderConfigError,
    ProviderContextOverflow,
    ProviderError,
    ProviderRateLimited,
    ProviderSettings,
    ProviderUnavailable,
    ToolSpec,
)
from agent.providers.events import SseEvents
from agent.providers.openai import OpenAIProvider
from tests.fakes.openai_server import FakeOpenAI, Reply, ShownPace

KEY = "sk-test-key-123"
CALC = ToolSpec(
    name="calculator",
    description="Evaluate an arithmetic expression",
    parameters={"type": "object", "properties": {"expr": {"type": "string"}}, "required": ["expr"]},
)


_open: list[OpenAIProvider] = []
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        server.api_key = KEY
        try:
            yield server
        finally:
            while _open:  # close providers even when a test failed half-way
                await _open.pop().aclose()


class Waits:
    """Records the retry waits instead of sleeping through them."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def make(fake: FakeOpenAI, waits: Waits | None = None, **overrides: object) -> OpenAIProvider:
    fields: dict[str, object] = {"name": "default", "api_key": KEY, "base_url": fake.base_url}
    fields.update(overrides)
    settings = ProviderSettings(**fields)  # type: ignore[arg-type]
    provider = OpenAIProvider(settings, sleep=waits or Waits())
    _open.append(provider)
    return provider


async def _discard(_: str) -> None:
    pass


def ask(text: str = "hi", *, tools: tuple[ToolSpec, ...] = ()) -> LLMRequest:
    return LLMRequest(model="gpt-test", messages=[ChatMessage.user(text)], tools=tools)


async def test_tool_call_round_trip_puts_exact_body_on_the_wire(fake: FakeOpenAI) -> None:
    provider = make(fake)
    fake.add_tool_call("calculator", {"expr": "6*7"}, call_id="call_abc")
    fake.add_text("It is 42.")
    history = [
        ChatMessage.system("You are terse."),
        ChatMessage.user("what is 6*7?"),
    ]
    first = await provider.complete(
        LLMRequest(model="gpt-test", messages=history, tools=(CALC,), temperature=0.2)
    )
    assert first.tool_calls == (ToolCall("call_abc", "calculator", '{"expr": "6*7"}'),)
    assert first.finish_reason == "tool_calls"

    assistant = ChatMessage(Role.ASSISTANT, "", tool_calls=first.tool_calls)
    history += [assistant, ChatMessage.tool_result(first.tool_calls[0], "42")]
    second = await provider.complete(
        LLMRequest(model="gpt-test", messages=history, tools=(CALC,), max_tokens=50)
    )
    assert second.content == "It is 42."
    tools_wire = [
        {
            "type": "function",
            "function": {
                "name": "calculator",
                "description": "Evaluate an arithmetic expression",
                "parameters": CALC.parameters,
            },
        }
    ]
    assert fake.requests[1] == {
        "model": "gpt-test",
        "max_tokens": 50,
        "tools": tools_wire,
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "what is 6*7?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_abc",
                        "type": "function",
                        "function": {"name": "calculator", "arguments": '{"expr": "6*7"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_abc", "content": "42"},
        ],
    }
    assert fake.requests[0]["temperature"] == 0.2
    assert "stream" not in fake.requests[0]
    assert fake.request_headers[0]["Authorization"] == f"Bearer {KEY}"


async def test_streaming_forwards_deltas_and_assembles_text(fake: FakeOpenAI) -> None:
    provider = make(fake)
    pace = ShownPace()
    fake.add_reply(Reply(text="the quick brown fox", usage=(12, 4), after_text=pace.until_shown))
    response = await provider.complete(ask(), pace.sink)
    assert pace.shown == ["the ", "quick ", "brown ", "fox"]
    assert "".join(pace.shown) == "the quick brown fox" == response.content
    assert response.usage == Usage(12, 4)
    assert fake.requests[0]["stream"] is True
    assert fake.requests[0]["stream_options"] == {"include_usage": True}


async def test_streamed_tool_calls_are_assembled_from_fragments(fake: FakeOpenAI) -> None:
    provider = make(fake)
    fake.add_tool_calls([("calculator", {"expr": "1 + 2 + 3"}), ("get_time", {"tz": "UTC"})])
    deltas: list[str] = []

    async def sink(text: str) -> None:
        deltas.append(text)

    response = await provider.complete(ask(tools=(CALC,)), sink)
    assert [c.name for c in response.tool_calls] == ["calculator", "get_time"]
    assert [json.loads(c.arguments) for c in response.tool_calls] == [
        {"expr": "1 + 2 + 3"},
        {"tz": "UTC"},
    ]
    assert all(c.id.startswith("call_") for c in response.tool_calls)
    assert response.finish_reason == "tool_calls"
    assert deltas == []


@pytest.mark.parametrize("stream", [False, True])
async def test_reasoning_content_is_kept(fake: FakeOpenAI, stream: bool) -> None:
    provider = make(fake)
    fake.add_text("answer", reasoning="first think, then answer")
    seen: list[str] = []

    async def sink(text: str) -> None:
        seen.append(text)

    response = await provider.complete(ask(), sink if stream else None)
    assert response.reasoning_content == "first think, then answer"
    assert response.content == "answer"
    assert "".join(seen) == ("answer" if stream else "")


async def test_reasoning_is_sent_back_with_tool_calls(fake: FakeOpenAI) -> None:
    provider = make(fake)
    call = ToolCall("c1", "calculator", "{}")
    assistant = ChatMessage(Role.ASSISTANT, "", tool_calls=(call,), reasoning_content="why")
    history = [ChatMessage.user("q"), assistant, ChatMessage.tool_result(call, "r")]
    await provider.complete(LLMRequest(model="m", messages=history))
    assert fake.requests[0]["messages"][1]["reasoning_content"] == "why"


async def test_image_media_become_image_url_parts(fake: FakeOpenAI, tmp_path: Path) -> None:
    provider = make(fake)
    png = tmp_path / "cat.PNG"
    png.write_bytes(b"\x89PNG\r\n\x1a\nfake-pixels")
    pdf = tmp_path / "report.pdf"
    pdf.write_bytes(b"%PDF-1.4")
    message = ChatMessage.user("what is this?", media=(str(png), str(pdf)))
    await provider.complete(LLMRequest(model="m", messages=[message]))
    content = fake.requests[0]["messages"][0]["content"]
    encoded = base64.b64encode(png.read_bytes()).decode()
    assert content == [
        {"type": "text", "text": f"what is this?\n\n[attached files: {pdf}]"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{encoded}"}},
    ]


async def test_default_reply_echoes_last_user_text(fake: FakeOpenAI) -> None:
    provider = make(fake)
    response = await provider.complete(ask("ping 1"))
    assert response.content == "echo: ping 1"
    assert response.usage == Usage(2, 3)  # words in, words out


async def test_rate_limit_honours_retry_after_then_succeeds(fake: FakeOpenAI) -> None:
    waits = Waits()
    provider = make(fake, waits)
    fake.add_error(429, headers={"Retry-After": "1"})
    fake.add_text("finally")
    response = await provider.complete(ask())
    assert response.content == "finally"
    assert len(fake.requests) == 2
    assert waits.waits == [1.0]


async def test_server_errors_forever_give_up_after_bounded_attempts(fake: FakeOpenAI) -> None:
    waits = Waits()
    provider = make(fake, waits, max_retries=2, retry_max_wait_secs=5.0)
    for _ in range(5):
        fake.add_error(500)
    with pytest.raises(ProviderUnavailable) as caught:
        await provider.complete(ask())
    assert len(fake.requests) == 3
    assert len(waits.waits) == 2
    assert all(0 < w <= 5.0 for w in waits.waits)
    assert "HTTP 500" in str(caught.value)


async def test_bad_key_is_auth_error_without_retry(fake: FakeOpenAI) -> None:
    waits = Waits()
    provider = make(fake, waits, api_key="sk-wrong-secret")
    with pytest.raises(ProviderAuthError) as caught:
        await provider.complete(ask())
    assert len(fake.requests) == 1
    assert waits.waits == []
    assert "sk-wrong-secret" not in str(caught.value)


async def test_bad_request_is_not_retried(fake: FakeOpenAI) -> None:
    waits = Waits()
    provider = make(fake, waits)
    fake.add_error(400, body={"error": {"message": "bad tools", "type": "invalid_request_error"}})
    with pytest.raises(ProviderError) as caught:
        await provider.complete(ask())
    assert not isinstance(caught.value, ProviderRateLimited | ProviderUnavailable)
    assert "bad tools" in str(caught.value)
    assert len(fake.requests) == 1


async def test_stream_failing_after_text_is_not_retried(fake: FakeOpenAI) -> None:
    waits = Waits()
    provider = make(fake, waits)
    fake.add_reply(Reply(text="partial answer here", stream_error="overloaded"))
    fake.add_text("must not be used")
    deltas: list[str] = []

    async def sink(text: str) -> None:
        deltas.append(text)

    with pytest.raises(ProviderUnavailable):
        await provider.complete(ask(), sink)
    assert "".join(deltas) == "partial answer here"
    assert len(fake.requests) == 1
    assert waits.waits == []


async def test_a_context_length_error_inside_a_stream_is_an_overflow(fake: FakeOpenAI) -> None:
    """A proxy that reports it inside the 200 stream: the session is compacted
    and the call tried once more (the loop's job), not retried as it is."""
    waits = Waits()
    provider = make(fake, waits)
    fake.add_reply(Reply(stream_error="This model's maximum context length is 8192 tokens"))
    with pytest.raises(ProviderContextOverflow, match="maximum context length"):
        await provider.complete(ask(), _discard)
    assert len(fake.requests) == 1
    assert waits.waits == []


async def test_missing_key_names_the_env_var_and_sends_nothing(fake: FakeOpenAI) -> None:
    provider = make(fake, api_key="", api_key_hint="OPENAI_API_KEY")
    with pytest.raises(ProviderConfigError) as caught:
        await provider.complete(ask())
    assert str(caught.value) == (
        "provider 'default' has no API key: set OPENAI_API_KEY (providers.default.api_key)"
    )
    assert fake.requests == []


async def test_unreachable_server_is_unavailable() -> None:
    server = FakeOpenAI()
    await server.start()
    url = server.base_url
    await server.close()
    waits = Waits()
    settings = ProviderSettings(name="down", api_key=KEY, base_url=url, max_retries=1)
    provider = OpenAIProvider(settings, sleep=waits)
    try:
        with pytest.raises(ProviderUnavailable):
            await provider.complete(ask())
    finally:
        await provider.aclose()
    assert len(waits.waits) == 1


async def test_extra_headers_reach_the_server(fake: FakeOpenAI) -> None:
    provider = make(fake, extra_headers={"X-Tenant": "blue"})
    await provider.complete(ask())
    assert fake.request_headers[0]["X-Tenant"] == "blue"


async def test_a_request_carries_what_the_sdks_own_post_sends(fake: FakeOpenAI) -> None:
    """The provider sends on the SDK's HTTP client's session, without `client.post`
    (agent.providers.openai): path and headers must stay what `post` builds,
    also after an SDK upgrade changes them."""
    extra = {"X-Tenant": "blue", "user-agent": "picobot-test"}  # another case than the SDK's
    provider = make(fake, extra_headers=extra)
    await provider.complete(ask())
    timeout = ProviderSettings(name="default", api_key=KEY).timeout_secs
    client = openai.AsyncOpenAI(
        api_key=KEY,
        base_url=fake.base_url,
        default_headers=extra,
        timeout=timeout,
        max_retries=0,
        http_client=openai.DefaultAioHttpClient(timeout=timeout),
    )
    try:
        body = json.dumps(fake.requests[0], separators=(",", ":")).encode()
        await client.post("/chat/completions", content=body, cast_to=object)
    finally:
        await client.close()
    ours, sdks = (sorted((k.lower(), v) for k, v in h.items()) for h in fake.request_headers)
    assert ours == sdks
    assert ("authorization", f"Bearer {KEY}") in ours
    assert ("user-agent", "picobot-test") in ours


async def _serve(answer: Handler) -> tuple[web.AppRunner, str]:
    """A service on loopback whose chat completions `answer` gives; its base URL."""
    app = web.Application()
    app.router.add_post("/v1/chat/completions", answer)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}/v1"


async def _page_server(status: int, text: str) -> tuple[web.AppRunner, str]:
    async def answer(_: web.Request) -> web.Response:
        return web.Response(status=status, text=text, content_type="text/html")

    return await _serve(answer)


@pytest.mark.parametrize(
    ("status", "text", "error", "says"),
    [
        # retried: a proxy between picobot and the service
        (502, "Bad Gateway from the proxy", ProviderUnavailable, "HTTP 502"),
        # a captive portal's redirect is not a reply
        (302, "Bad Gateway from the proxy", ProviderError, "HTTP 302"),
        (200, "Bad Gateway from the proxy", ProviderError, "unexpected response shape"),
        # nested deeper than json reads (RecursionError, not ValueError)
        (200, "[" * 20_000 + "]" * 20_000, ProviderError, "unexpected response shape"),
    ],
)
async def test_a_page_that_is_not_json_is_a_provider_error(
    status: int, text: str, error: type[ProviderError], says: str
) -> None:
    runner, url = await _page_server(status, text)
    settings = ProviderSettings(name="default", api_key=KEY, base_url=url, max_retries=0)
    provider = OpenAIProvider(settings, sleep=Waits())
    try:
        with pytest.raises(error) as caught:
            await provider.complete(ask())
    finally:
        await provider.aclose()
        await runner.cleanup()
    assert type(caught.value) is error
    assert says in str(caught.value)


def _chunk(**delta: object) -> str:
    return json.dumps({"choices": [{"index": 0, "delta": delta, "finish_reason": None}]})


# lone CR, CRLF and LF line ends, a comment, an event whose data spans two
# lines (joined by CRLF), non-ASCII text, and a last event without its
# closing empty line
_AWKWARD_STREAM = (
    f"data: {_chunk(content='Grüße, ')}\r\r"
    ": keep-alive\r\n\r\n"
    f"data: {_chunk(content='世界')}\n\n"
    'data: {"choices": [{"index": 0,\r\ndata: "delta": {"content": "!"}}]}\r\n\r\n'
    'data:{"choices": [{"index": 0, "delta": {"content": " end"}, "finish_reason": "stop"}]}'
).encode()


async def _sse_server(body: bytes, pieces: int) -> tuple[web.AppRunner, str]:
    async def answer(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        size = -(-len(body) // pieces)
        for at in range(0, len(body), size):
            await response.write(body[at : at + size])  # each piece a write of its own
        await response.write_eof()
        return response

    return await _serve(answer)


async def _deltas_of(stream: bytes, pieces: int) -> tuple[list[str], str]:
    """What a provider shows of `stream`, served in `pieces` writes, and its reply."""
    runner, url = await _sse_server(stream, pieces)
    provider = OpenAIProvider(ProviderSettings(name="default", api_key=KEY, base_url=url))
    deltas: list[str] = []

    async def sink(text: str) -> None:
        deltas.append(text)

    try:
        reply = await provider.complete(ask(), sink)
    finally:
        await provider.aclose()
        await runner.cleanup()
    return deltas, reply.content


async def test_a_stream_is_read_whatever_its_line_ends_and_pieces() -> None:
    deltas, reply = await _deltas_of(_AWKWARD_STREAM, pieces=7)
    assert "".join(deltas) == reply == "Grüße, 世界! end"


async def test_the_deltas_of_one_read_go_on_as_one() -> None:
    """A short reply that comes in one piece is one delta, not one per token."""
    words = ("the ", "quick ", "fox")
    stream = "".join(f"data: {_chunk(content=w)}\n\n" for w in words) + "data: [DONE]\n\n"
    deltas, reply = await _deltas_of(stream.encode(), pieces=1)
    assert deltas == ["the quick fox"] == [reply]


async def test_an_event_that_is_not_json_is_a_stream_error() -> None:
    runner, url = await _sse_server(b"data: {not json\n\n", pieces=1)
    settings = ProviderSettings(name="default", api_key=KEY, base_url=url, max_retries=0)
    provider = OpenAIProvider(settings, sleep=Waits())

    async def sink(_: str) -> None:
        pass

    try:
        with pytest.raises(ProviderUnavailable, match="stream error"):
            await provider.complete(ask(), sink)
    finally:
        await provider.aclose()
        await runner.cleanup()


# SSE comments (ignored by every reader), far more than one read takes
_TRAILING_COMMENTS = b": " + b"x" * 1_000 + b"\n" * 2
_TRAILING_COMMENTS *= 256


async def _stream_of(url: str) -> str:
    provider = OpenAIProvider(ProviderSettings(name="default", api_key=KEY, base_url=url))

    async def sink(_: str) -> None:
        pass

    try:
        return (await provider.complete(ask(), sink)).content
    finally:
        await provider.aclose()


async def test_nothing_after_done_counts() -> None:
    body = f"data: {_chunk(content='hi')}\n\ndata: [DONE]\n\ndata: {{not json\n\n"
    runner, url = await _sse_server((body + f"data: {_chunk(content='!')}\n\n").encode(), 1)
    try:
        assert await _stream_of(url) == "hi"
    finally:
        await runner.cleanup()


async def test_a_finish_reason_without_done_is_a_whole_reply() -> None:
    """Some compatible servers end the body after the finishing chunk."""
    last = {"choices": [{"index": 0, "delta": {"content": "!"}, "finish_reason": "stop"}]}
    runner, url = await _sse_server(
        f"data: {_chunk(content='hi')}\n\ndata: {json.dumps(last)}\n\n".encode(), 2
    )
    try:
        assert await _stream_of(url) == "hi!"
    finally:
        await runner.cleanup()


async def test_a_stream_held_open_after_done_does_not_hold_the_reply() -> None:
    """The server never ends the body: the reply still comes, not after the
    read timeout (120 s, the default)."""
    release = asyncio.Event()

    async def answer(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(f"data: {_chunk(content='hi')}\n\ndata: [DONE]\n\n".encode())
        await release.wait()
        return response

    runner, url = await _serve(answer)
    try:
        async with asyncio.timeout(20):
            assert await _stream_of(url) == "hi"
    finally:
        release.set()
        await runner.cleanup()


async def test_streamed_replies_reuse_the_connection() -> None:
    """The body is still read to its end after [DONE], even when that end
    comes pieces later, so the next call needs no new connection."""
    peers: list[object] = []

    async def answer(request: web.Request) -> web.StreamResponse:
        assert request.transport is not None
        peers.append(request.transport.get_extra_info("peername"))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(f"data: {_chunk(content='hi')}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        await response.write(_TRAILING_COMMENTS)  # the end comes in later pieces
        await response.write_eof()
        return response

    runner, url = await _serve(answer)
    provider = OpenAIProvider(ProviderSettings(name="default", api_key=KEY, base_url=url))

    async def sink(_: str) -> None:
        pass

    try:
        for _ in range(3):
            assert (await provider.complete(ask(), sink)).content == "hi"
    finally:
        await provider.aclose()
        await runner.cleanup()
    assert len(peers) == 3
    assert len(set(peers)) == 1


async def test_a_cookie_the_service_sets_comes_back_on_the_next_request() -> None:
    """A sticky load balancer's cookie, as the SDK's own requests carry it."""
    cookies: list[str | None] = []

    async def answer(request: web.Request) -> web.Response:
        cookies.append(request.headers.get("Cookie"))
        body = {"choices": [{"message": {"role": "assistant", "content": "hi"}}]}
        response = web.json_response(body)
        response.set_cookie("lb", "sticky1")
        return response

    runner, url = await _serve(answer)
    provider = OpenAIProvider(ProviderSettings(name="default", api_key=KEY, base_url=url))
    try:
        for _ in range(2):
            assert (await provider.complete(ask())).content == "hi"
    finally:
        await provider.aclose()
        await runner.cleanup()
    assert cookies == [None, "lb=sticky1"]


def test_stream_events_do_not_depend_on_where_the_bytes_are_cut() -> None:
    whole = SseEvents()
    expected = whole.feed(_AWKWARD_STREAM) + whole.end()
    assert len(expected) == 4
    for cut in range(1, len(_AWKWARD_STREAM)):
        events = SseEvents()
        got = events.feed(_AWKWARD_STREAM[:cut]) + events.feed(_AWKWARD_STREAM[cut:])
        assert got + events.end() == expected, cut
    one_by_one = SseEvents()
    got = [
        e for i in range(len(_AWKWARD_STREAM)) for e in one_by_one.feed(_AWKWARD_STREAM[i : i + 1])
    ]
    assert got + one_by_one.end() == expected


async def test_create_provider_builds_openai_and_rejects_unknown_kind(fake: FakeOpenAI) -> None:
    settings = ProviderSettings(name="p", api_key=KEY, base_url=fake.base_url)
    provider = create_provider("openai", settings)
    assert isinstance(provider, OpenAIProvider)
    _open.append(provider)
    assert provider.name == "p"
    assert (await provider.complete(ask("x"))).content == "echo: x"
    with pytest.raises(ProviderConfigError, match="unknown type"):
        create_provider("gemini", settings)


async def test_fake_holds_requests_until_released(fake: FakeOpenAI) -> None:
    provider = make(fake)
    fake.hold()
    task = asyncio.create_task(provider.complete(ask("held")))
    await fake.wait_requests(1)
    assert not task.done()
    fake.release()
    assert (await asyncio.wait_for(task, 5)).content == "echo: held"


async def test_responder_picks_replies_from_the_request(fake: FakeOpenAI) -> None:
    async def by_model(body: dict[str, object]) -> Reply | None:
        return Reply(text="summary!") if body["model"] == "summarizer" else None

    fake.responder = by_model
    fake.add_text("scripted")
    provider = make(fake)
    summary = await provider.complete(
        LLMRequest(model="summarizer", messages=[ChatMessage.user("x")])
    )
    chat = await provider.complete(ask("y"))
    assert (summary.content, chat.content) == ("summary!", "scripted")


async def test_cancelling_a_turn_mid_request_propagates_and_leaves_provider_usable(
    fake: FakeOpenAI,
) -> None:
    waits = Waits()
    provider = make(fake, waits)
    fake.hold()
    deltas: list[str] = []

    async def sink(text: str) -> None:
        deltas.append(text)

    task = asyncio.create_task(provider.complete(ask("slow"), sink))
    await fake.wait_requests(1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert waits.waits == []
    fake.release()
    assert (await provider.complete(ask("again"))).content == "echo: again"


async def test_unreadable_image_is_mentioned_not_fatal(fake: FakeOpenAI, tmp_path: Path) -> None:
    provider = make(fake)
    missing = tmp_path / "gone.png"
    await provider.complete(
        LLMRequest(model="m", messages=[ChatMessage.user("look", (str(missing),))])
    )
    assert fake.requests[0]["messages"][0] == {
        "role": "user",
        "content": f"look\n\n[attached files: {missing}]",
    }
