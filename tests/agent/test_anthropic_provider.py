"""AnthropicProvider on the real `anthropic` SDK's client against FakeAnthropic on
loopback, and against raw replies the fake does not script."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path

import anthropic
import pytest
from aiohttp import web

from agent.messages import ChatMessage, Role, ToolCall, Usage
from agent.providers import create_provider
from agent.providers.anthropic import AnthropicProvider
from agent.providers.base import (
    LLMRequest,
    LLMResponse,
    ProviderAuthError,
    ProviderConfigError,
    ProviderContextOverflow,
    ProviderError,
    ProviderRateLimited,
    ProviderSettings,
    ProviderUnavailable,
    ToolSpec,
)
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.openai_server import Reply, ShownPace

KEY = "sk-ant-test-456"
CALC = ToolSpec(
    name="calculator",
    description="Evaluate an arithmetic expression",
    parameters={"type": "object", "properties": {"expr": {"type": "string"}}, "required": ["expr"]},
)

_open: list[AnthropicProvider] = []


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
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


def make(fake: FakeAnthropic, waits: Waits | None = None, **overrides: object) -> AnthropicProvider:
    fields: dict[str, object] = {"name": "claude", "api_key": KEY, "base_url": fake.base_url}
    fields.update(overrides)
    settings = ProviderSettings(**fields)  # type: ignore[arg-type]
    provider = AnthropicProvider(settings, sleep=waits or Waits())
    _open.append(provider)
    return provider


def ask(text: str = "hi", **kwargs: object) -> LLMRequest:
    return LLMRequest(model="claude-test", messages=[ChatMessage.user(text)], **kwargs)  # type: ignore[arg-type]


async def test_tool_call_round_trip_puts_exact_body_on_the_wire(fake: FakeAnthropic) -> None:
    provider = make(fake)
    fake.add_tool_calls([("calculator", {"expr": "6*7"}), ("calculator", {"expr": "2+2"})])
    fake.add_text("42 and 4.")
    history = [ChatMessage.system("You are terse."), ChatMessage.user("compute 6*7 and 2+2")]
    first = await provider.complete(
        LLMRequest(model="claude-test", messages=history, tools=(CALC,))
    )
    assert [json.loads(c.arguments) for c in first.tool_calls] == [{"expr": "6*7"}, {"expr": "2+2"}]
    assert first.finish_reason == "tool_use"

    one, two = first.tool_calls
    history += [
        ChatMessage(Role.ASSISTANT, "Let me compute.", tool_calls=first.tool_calls),
        ChatMessage.tool_result(one, "42"),
        ChatMessage.tool_result(two, "4"),
        ChatMessage.system("Skill index: none.", marker="skill_index"),
        ChatMessage.user("and be quick"),
    ]
    second = await provider.complete(
        LLMRequest(model="claude-test", messages=history, tools=(CALC,), max_tokens=300)
    )
    assert second.content == "42 and 4."
    assert fake.requests[0]["max_tokens"] == 4096  # required by the API; our default
    assert fake.requests[1] == {
        "model": "claude-test",
        "max_tokens": 300,
        "system": [{"type": "text", "text": "You are terse."}],
        "tools": [
            {
                "name": "calculator",
                "description": "Evaluate an arithmetic expression",
                "input_schema": CALC.parameters,
            }
        ],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "compute 6*7 and 2+2"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Let me compute."},
                    {
                        "type": "tool_use",
                        "id": one.id,
                        "name": "calculator",
                        "input": {"expr": "6*7"},
                    },
                    {
                        "type": "tool_use",
                        "id": two.id,
                        "name": "calculator",
                        "input": {"expr": "2+2"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": one.id, "content": "42"},
                    {"type": "tool_result", "tool_use_id": two.id, "content": "4"},
                    # a system message after the first user turn stays in place
                    {
                        "type": "text",
                        "text": "<system-reminder>\nSkill index: none.\n</system-reminder>",
                    },
                    {"type": "text", "text": "and be quick"},
                ],
            },
        ],
    }
    assert "anthropic-version" in fake.request_headers[0]


async def test_streaming_forwards_deltas_and_assembles_text(fake: FakeAnthropic) -> None:
    provider = make(fake)
    pace = ShownPace()
    fake.add_reply(Reply(text="the quick brown fox", usage=(21, 5), after_text=pace.until_shown))
    response = await provider.complete(ask(), pace.sink)
    assert pace.shown == ["the ", "quick ", "brown ", "fox"]
    assert "".join(pace.shown) == "the quick brown fox" == response.content
    assert response.usage == Usage(21, 5)
    assert response.finish_reason == "end_turn"
    assert fake.requests[0]["stream"] is True


async def test_streamed_tool_use_is_assembled_from_json_deltas(fake: FakeAnthropic) -> None:
    provider = make(fake)
    fake.add_tool_call("calculator", {"expr": "1 + 2 + 3", "precise": True}, call_id="toolu_x")
    deltas: list[str] = []

    async def sink(text: str) -> None:
        deltas.append(text)

    response = await provider.complete(ask(tools=(CALC,)), sink)
    assert deltas == []
    [call] = response.tool_calls
    assert (call.id, call.name) == ("toolu_x", "calculator")
    assert json.loads(call.arguments) == {"expr": "1 + 2 + 3", "precise": True}
    assert response.finish_reason == "tool_use"


async def _discard(text: str) -> None:
    return None


@pytest.mark.parametrize("stream", [False, True])
async def test_thinking_is_kept_as_reasoning_content(fake: FakeAnthropic, stream: bool) -> None:
    provider = make(fake)
    fake.add_text("answer", reasoning="first think, then answer")
    response = await provider.complete(ask(), _discard if stream else None)
    assert response.reasoning_content == "first think, then answer"
    assert response.content == "answer"


async def test_image_media_become_base64_image_blocks(fake: FakeAnthropic, tmp_path: Path) -> None:
    provider = make(fake)
    jpg = tmp_path / "photo.jpeg"
    jpg.write_bytes(b"\xff\xd8\xff\xe0fake-jpeg")
    await provider.complete(
        LLMRequest(model="m", messages=[ChatMessage.user("describe", media=(str(jpg),))])
    )
    assert fake.requests[0]["messages"][0]["content"] == [
        {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": "image/jpeg",
                "data": base64.b64encode(jpg.read_bytes()).decode(),
            },
        },
        {"type": "text", "text": "describe"},
    ]


async def test_temperature_and_usage_reach_the_wire_and_back(fake: FakeAnthropic) -> None:
    provider = make(fake)
    fake.add_text("ok", usage=(100, 2))
    response = await provider.complete(ask(temperature=0.4))
    assert fake.requests[0]["temperature"] == 0.4
    assert response.usage == Usage(100, 2)


async def test_rate_limit_honours_retry_after_then_succeeds(fake: FakeAnthropic) -> None:
    waits = Waits()
    provider = make(fake, waits)
    fake.add_error(429, headers={"Retry-After": "1"})
    fake.add_text("finally")
    assert (await provider.complete(ask())).content == "finally"
    assert len(fake.requests) == 2
    assert waits.waits == [1.0]


async def test_server_errors_forever_give_up_after_bounded_attempts(fake: FakeAnthropic) -> None:
    waits = Waits()
    provider = make(fake, waits, max_retries=3, retry_max_wait_secs=10.0)
    fake.add_error(529)  # overloaded counts as unavailable too
    for _ in range(6):
        fake.add_error(500)
    with pytest.raises(ProviderUnavailable):
        await provider.complete(ask())
    assert len(fake.requests) == 4
    assert len(waits.waits) == 3
    assert sum(waits.waits) <= 10.0


async def test_bad_key_is_auth_error_without_retry(fake: FakeAnthropic) -> None:
    waits = Waits()
    provider = make(fake, waits, api_key="sk-ant-wrong")
    with pytest.raises(ProviderAuthError) as caught:
        await provider.complete(ask())
    assert len(fake.requests) == 1
    assert waits.waits == []
    assert "sk-ant-wrong" not in str(caught.value)


async def test_missing_key_names_the_env_var(fake: FakeAnthropic) -> None:
    provider = make(fake, api_key="", api_key_hint="ANTHROPIC_API_KEY")
    with pytest.raises(ProviderConfigError, match=r"set ANTHROPIC_API_KEY \(providers\.claude"):
        await provider.complete(ask())
    assert fake.requests == []


async def test_stream_error_after_text_is_not_retried(fake: FakeAnthropic) -> None:
    waits = Waits()
    provider = make(fake, waits)
    fake.add_reply(Reply(text="partial answer here", stream_error="Overloaded"))
    fake.add_text("must not be used")
    deltas: list[str] = []

    async def sink(text: str) -> None:
        deltas.append(text)

    with pytest.raises(ProviderUnavailable):
        await provider.complete(ask(), sink)
    assert "".join(deltas) == "partial answer here"
    assert len(fake.requests) == 1
    assert waits.waits == []


async def test_a_request_carries_what_the_sdks_own_call_sends(fake: FakeAnthropic) -> None:
    """The provider sends on the SDK's HTTP client's session, without `client.post`
    or the typed `messages.create` (agent.providers.route): path and headers
    must stay what `post` builds, and the body what `create` sends, also
    after an SDK upgrade changes them."""
    extra = {"anthropic-beta": "blue", "user-agent": "picobot-test"}  # another case than the SDK's
    # built in a worker thread, as DeferredProvider builds it
    provider = await asyncio.to_thread(make, fake, extra_headers=extra)
    await provider.complete(ask("what is 6*7?", tools=(CALC,), temperature=0.2))
    timeout = ProviderSettings(name="c", api_key=KEY).timeout_secs
    client = anthropic.AsyncAnthropic(
        api_key=KEY,
        base_url=fake.base_url,
        default_headers=extra,
        timeout=timeout,
        max_retries=0,
        http_client=anthropic.DefaultAioHttpClient(timeout=timeout),
    )
    try:
        ours = fake.requests[0]
        body = json.dumps(ours, separators=(",", ":")).encode()
        await client.post("/v1/messages", content=body, cast_to=object)
        typed = {k: v for k, v in ours.items() if k != "temperature"}
        await client.messages.create(**typed, extra_body={"temperature": 0.2})
    finally:
        await client.close()
    # but the per-call timeout `post` reports: this SDK sends "NOT_GIVEN" there
    mine, posts = (
        sorted((k.lower(), v) for k, v in h.items() if k.lower() != "x-stainless-timeout")
        for h in fake.request_headers[:2]
    )
    assert mine == posts
    assert ("user-agent", "picobot-test") in mine
    assert ("anthropic-beta", "blue") in mine
    assert fake.requests[2] == ours


async def test_create_provider_builds_anthropic(fake: FakeAnthropic) -> None:
    settings = ProviderSettings(name="c", api_key=KEY, base_url=fake.base_url)
    provider = create_provider("anthropic", settings)
    assert isinstance(provider, AnthropicProvider)
    _open.append(provider)
    assert (await provider.complete(ask("x"))).content == "echo: x"


async def test_cancelling_a_streamed_turn_propagates(fake: FakeAnthropic) -> None:
    waits = Waits()
    provider = make(fake, waits)
    fake.hold()
    task = asyncio.create_task(provider.complete(ask("slow"), _discard))
    await fake.wait_requests(1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert waits.waits == []
    fake.release()
    assert (await provider.complete(ask("again"), _discard)).content == "echo: again"


async def test_a_stream_held_open_after_message_stop_does_not_hold_the_reply(
    fake: FakeAnthropic,
) -> None:
    """The body never ends: the reply still comes, not after the read timeout
    (120 s, the default)."""
    fake.hold_open = asyncio.Event()
    fake.add_text("Hello there")
    try:
        async with asyncio.timeout(20):
            reply = await make(fake).complete(ask(), _discard)
    finally:
        fake.hold_open.set()
    assert reply.content == "Hello there"
    assert reply.finish_reason == "end_turn"


async def test_streamed_replies_reuse_the_connection(fake: FakeAnthropic) -> None:
    """After message_stop the body is still read to its end, even when that
    end comes pieces later, so the next call needs no new connection."""
    fake.trailing_comment_bytes = 256_000
    provider = make(fake)
    for _ in range(3):
        fake.add_text("Hello there")
        assert (await provider.complete(ask(), _discard)).content == "Hello there"
    assert len(fake.peers) == 3
    assert len(set(fake.peers)) == 1


async def test_a_stream_that_ends_without_a_message_is_unavailable(fake: FakeAnthropic) -> None:
    """An empty 200 stream is a provider failure (retried), not a crash."""
    fake.empty_stream = True
    with pytest.raises(ProviderUnavailable, match="ended without a message"):
        await make(fake, max_retries=0).complete(ask(), _discard)


# Replies the fake does not script: what proxies and compatible servers send.
_START = {
    "type": "message_start",
    "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": [],
        "stop_reason": None, "usage": {"input_tokens": 5, "output_tokens": 1},
    },
}  # fmt: skip
_STOP = {"type": "message_stop"}


def _block(index: int, **block: object) -> dict[str, object]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def _delta(index: int, **delta: object) -> dict[str, object]:
    return {"type": "content_block_delta", "index": index, "delta": delta}


def _finish(reason: str) -> dict[str, object]:
    return {
        "type": "message_delta",
        "delta": {"stop_reason": reason},
        "usage": {"output_tokens": 3},
    }


def _sse(*events: dict[str, object] | tuple[str, str]) -> bytes:
    """Each event named by its type; a (name, raw data) pair as it is."""
    out = []
    for event in events:
        name, data = event if isinstance(event, tuple) else (event["type"], json.dumps(event))
        out.append(f"event: {name}\ndata: {data}\n\n")
    return "".join(out).encode()


async def _replying(status: int, content_type: str, body: bytes) -> tuple[web.AppRunner, str]:
    async def answer(_: web.Request) -> web.Response:
        return web.Response(status=status, body=body, headers={"Content-Type": content_type})

    app = web.Application()
    app.router.add_post("/v1/messages", answer)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}"


async def _complete_from(body: bytes, *, stream: bool = True, status: int = 200) -> LLMResponse:
    kind = "text/event-stream" if stream else "application/json"
    runner, url = await _replying(status, kind, body)
    settings = ProviderSettings(name="c", api_key=KEY, base_url=url, max_retries=0)
    provider = AnthropicProvider(settings, sleep=Waits())
    shown: list[str] = []

    async def sink(text: str) -> None:
        shown.append(text)

    try:
        reply = await provider.complete(ask(), sink if stream else None)
    finally:
        await provider.aclose()
        await runner.cleanup()
    assert "".join(shown) == reply.content  # what the user saw is what is kept
    return reply


async def test_an_error_event_is_known_by_its_name_whatever_its_data() -> None:
    error = ("error", json.dumps({"error": {"type": "authentication_error", "message": "no"}}))
    with pytest.raises(ProviderAuthError):
        await _complete_from(_sse(_START, error, _block(0, type="text", text=""), _STOP))


@pytest.mark.parametrize(
    ("kind", "message", "error"),
    [
        ("overloaded_error", "Overloaded", ProviderUnavailable),
        ("rate_limit_error", "slow down", ProviderRateLimited),
        ("request_too_large", "too big", ProviderContextOverflow),
        ("invalid_request_error", "prompt is too long: 210000 tokens", ProviderContextOverflow),
        ("invalid_request_error", "tools.0: bad schema", ProviderError),
    ],
)
async def test_an_error_event_is_classified_by_its_type(
    kind: str, message: str, error: type[ProviderError]
) -> None:
    event = {"type": "error", "error": {"type": kind, "message": message}}
    with pytest.raises(error) as caught:
        await _complete_from(_sse(_START, event))
    assert type(caught.value) is error


async def test_a_keep_alive_without_data_is_not_an_event() -> None:
    body = _sse(_START, ("ping", ""), _block(0, type="text", text=""), _delta(0, type="text_delta", text="hi"), _finish("end_turn"), _STOP)  # fmt: skip
    assert (await _complete_from(body)).content == "hi"


async def test_text_without_its_block_start_is_kept_as_shown() -> None:
    body = _sse(_START, _delta(0, type="text_delta", text="hi"), _finish("end_turn"), _STOP)
    assert (await _complete_from(body)).content == "hi"


async def test_tool_input_cut_off_by_max_tokens_reaches_the_loop_as_it_came() -> None:
    body = _sse(
        _START,
        _block(0, type="tool_use", id="t1", name="calculator", input={}),
        _delta(0, type="input_json_delta", partial_json='{"expr": "1+'),
        _finish("max_tokens"),
        _STOP,
    )
    reply = await _complete_from(body)
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [("calculator", '{"expr": "1+')]
    assert reply.finish_reason == "max_tokens"


@pytest.mark.parametrize(
    ("body", "error", "says"),
    [
        (json.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "Busy"}}),
         ProviderUnavailable, "HTTP 529 Busy"),
        ("<html>a proxy's page</html>", ProviderError, "unexpected response shape"),
        (json.dumps({"type": "completion", "completion": "hi"}), ProviderError, "unexpected response shape"),
        # a tool's input nested deeper than json reads (RecursionError, not ValueError)
        ('{"type": "message", "content": [{"type": "tool_use", "input": ' + "[" * 20_000 + "]" * 20_000 + "}]}",
         ProviderError, "unexpected response shape"),
    ],
)  # fmt: skip
async def test_a_200_body_that_is_not_a_message_is_no_reply(
    body: str, error: type[ProviderError], says: str
) -> None:
    with pytest.raises(error, match=says):
        await _complete_from(body.encode(), stream=False)


async def test_tool_arguments_that_are_not_strict_json_do_not_stick_the_chat(
    fake: FakeAnthropic,
) -> None:
    """A model once wrote NaN into a tool call: every later request carries
    that call, so it goes as the text it was, not as a body no encoder takes."""
    call = ToolCall("t1", "calculator", '{"expr": NaN}')
    history = [
        ChatMessage.user("compute"),
        ChatMessage(Role.ASSISTANT, "", tool_calls=(call,)),
        ChatMessage.tool_result(call, "error: bad arguments"),
        ChatMessage.user("again"),
    ]
    fake.add_text("done")
    reply = await make(fake).complete(LLMRequest(model="claude-test", messages=history))
    assert reply.content == "done"
    sent = fake.requests[0]["messages"][1]["content"][0]
    assert sent["input"] == {"raw_arguments": '{"expr": NaN}'}
