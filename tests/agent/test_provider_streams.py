"""Both providers, each on its SDK's client against its fake service: a
stream whose body ends before the reply does (a proxy cut it) is a failed
call — retried while no text was shown — never a truncated reply."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
import yarl

from agent.messages import ChatMessage, valid_arguments
from agent.providers.anthropic import AnthropicProvider
from agent.providers.base import LLMProvider, LLMRequest, ProviderSettings, ProviderUnavailable
from agent.providers.openai import OpenAIProvider
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.openai_server import FakeOpenAI, Reply, ScriptedToolCall, ShownPace

KEY = "sk-test-streams-789"
FINISH = {"openai": "stop", "anthropic": "end_turn"}  # how each says a reply is whole


class Waits:
    """Records the retry waits instead of sleeping through them."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.fixture(params=["openai", "anthropic"])
async def served(
    request: pytest.FixtureRequest,
) -> AsyncIterator[tuple[FakeOpenAI | FakeAnthropic, LLMProvider, Waits, str]]:
    kind: str = request.param
    fake = FakeOpenAI() if kind == "openai" else FakeAnthropic()
    async with fake:
        fake.api_key = KEY
        waits = Waits()
        settings = ProviderSettings(name=kind, api_key=KEY, base_url=fake.base_url)
        kinds = {"openai": OpenAIProvider, "anthropic": AnthropicProvider}
        provider: LLMProvider = kinds[kind](settings, sleep=waits)
        try:
            yield fake, provider, waits, kind
        finally:
            await provider.aclose()


def _ask() -> LLMRequest:
    return LLMRequest(model="m", messages=[ChatMessage.user("hi")])


async def test_a_stream_cut_short_after_text_fails_and_is_not_retried(
    served: tuple[FakeOpenAI | FakeAnthropic, LLMProvider, Waits, str],
) -> None:
    fake, provider, waits, _ = served
    fake.add_reply(Reply(text="partial answer here", cut_short=True))
    fake.add_text("must not be used")
    shown: list[str] = []

    async def sink(text: str) -> None:
        shown.append(text)

    with pytest.raises(ProviderUnavailable, match="ended before the reply was complete"):
        await provider.complete(_ask(), sink)
    assert "".join(shown) == "partial answer here"
    assert len(fake.requests) == 1
    assert waits.waits == []


async def test_a_stream_cut_short_before_any_text_is_retried(
    served: tuple[FakeOpenAI | FakeAnthropic, LLMProvider, Waits, str],
) -> None:
    fake, provider, waits, kind = served
    call = ScriptedToolCall("calculator", {"expression": "1"})
    fake.add_reply(Reply(tool_calls=(call,), cut_short=True))
    fake.add_text("whole")

    async def discard(_: str) -> None:
        pass

    reply = await provider.complete(_ask(), discard)
    assert (reply.content, reply.tool_calls, reply.finish_reason) == ("whole", (), FINISH[kind])
    assert len(fake.requests) == 2
    assert len(waits.waits) == 1


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("where", ["same origin", "another host"])
async def test_an_endpoint_that_redirects_is_followed_as_the_sdk_would(
    served: tuple[FakeOpenAI | FakeAnthropic, LLMProvider, Waits, str], streamed: bool, where: str
) -> None:
    """A 307 (an endpoint that moved) is followed by httpx's rules: the body
    again, the new host's `Host`, and the key only within the same origin.
    (The first call asks twice: once below httpx, then through it; later
    calls go through it at once.)"""
    fake, provider, _, kind = served
    base = yarl.URL(fake.base_url)
    path = "/v1/chat/completions" if kind == "openai" else "/v1/messages"
    target = path if where == "same origin" else f"http://localhost:{base.port}{path}"
    for _ in range(2):
        fake.add_reply(Reply(status=307, headers={"Location": target}))
    fake.add_text("moved answer")
    fake.api_key = None  # the fake answers whatever comes; what came is checked below
    shown: list[str] = []

    async def sink(text: str) -> None:
        shown.append(text)

    reply = await provider.complete(_ask(), sink if streamed else None)
    assert reply.content == "moved answer"
    assert "".join(shown) == ("moved answer" if streamed else "")
    first, again, second = fake.request_headers
    assert fake.requests[0] == fake.requests[1] == fake.requests[2]
    assert sorted(first.items()) == sorted(again.items())
    assert first["Host"] == f"127.0.0.1:{base.port}"
    assert second["Host"] == (first["Host"] if where == "same origin" else f"localhost:{base.port}")
    assert first["Authorization"] == f"Bearer {KEY}"  # how both SDKs send the key
    if where == "same origin":
        assert second["Authorization"] == f"Bearer {KEY}"
    else:
        assert "Authorization" not in second
    # later calls go through httpx at once: a redirect and its target
    fake.add_reply(Reply(status=307, headers={"Location": target}))
    fake.add_text("moved again")
    assert (await provider.complete(_ask(), sink if streamed else None)).content == "moved again"
    assert len(fake.requests) == 5


async def test_a_surrogate_pair_cut_between_two_events_comes_back_together(
    served: tuple[FakeOpenAI | FakeAnthropic, LLMProvider, Waits, str],
) -> None:
    """A service whose strings are UTF-16 cut an emoji in two, each half an
    escape in an event of its own, each event a read of its own: the half
    that ends a read waits for the other, and the reply and its deltas carry
    the emoji (json reads each half as a lone surrogate, which nothing after
    could encode: the turn crashed, with no reply at all)."""
    fake, provider, _, _ = served
    pace = ShownPace()
    fake.add_reply(Reply(text="a\ud83d\ude00b", after_text=pace.until_shown))
    reply = await provider.complete(_ask(), pace.sink)
    assert reply.content == "a\U0001f600b"
    assert pace.shown == ["a", "\U0001f600b"]


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("text", ["lone \ud800 half", "ends on \ud83d"])
async def test_half_a_surrogate_pair_alone_becomes_a_replacement_character(
    served: tuple[FakeOpenAI | FakeAnthropic, LLMProvider, Waits, str], streamed: bool, text: str
) -> None:
    """Wherever it stands: mid-text, or last (a first half that waited for
    its other at the end of a read, in vain)."""
    fake, provider, _, _ = served
    fake.add_reply(Reply(text=text, reasoning="a \udfff b"))
    shown: list[str] = []

    async def sink(piece: str) -> None:
        shown.append(piece)

    reply = await provider.complete(_ask(), sink if streamed else None)
    expected = text.replace("\ud800", "\ufffd").replace("\ud83d", "\ufffd")
    assert (reply.content, reply.reasoning_content) == (expected, "a \ufffd b")
    assert "".join(shown) == (expected if streamed else "")


@pytest.mark.parametrize("streamed", [False, True])
async def test_half_a_surrogate_pair_in_tool_arguments_becomes_a_replacement_character(
    served: tuple[FakeOpenAI | FakeAnthropic, LLMProvider, Waits, str], streamed: bool
) -> None:
    """Written as an escape the arguments are valid JSON, and json reads
    the half as a lone surrogate: the file tools, the chat's tool frames, an
    approval request and the stores could not encode it ('the tool failed
    unexpectedly', a crashed turn). A whole pair stays as the model wrote it."""
    fake, provider, _, _ = served
    written = r'{"path": "n.txt", "content": "half \ud83d, whole \ud83d\ude00"}'
    fake.add_reply(Reply(tool_calls=(ScriptedToolCall("write", written),)))

    async def sink(_: str) -> None:
        pass

    reply = await provider.complete(_ask(), sink if streamed else None)
    (call,) = reply.tool_calls
    assert json.loads(call.arguments) == {"path": "n.txt", "content": "half \ufffd, whole 😀"}
    call.arguments.encode("utf-8")


def test_arguments_without_a_lone_half_come_back_as_they_came() -> None:
    for text in [
        '{"a": "plain"}',
        r'{"a": "\ud83d\ude00"}',  # a whole pair, escaped
        r'{"a": "\\ud83d"}',  # a backslash, then the letters
        r'{"a": "\ud83d',  # not JSON: the tool runner says so
    ]:
        assert valid_arguments(text) is text
    assert valid_arguments('{"a": "\ud83d"}') == '{"a": "\ufffd"}'  # a half itself, not escaped
