"""FallbackProvider over scripted providers: which errors switch, the wait
before a failed model is asked again, streaming, a context window too small,
and the metric/log hook."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

import pytest
from structlog.testing import capture_logs

from agent.messages import ChatMessage
from agent.providers.base import (
    DeltaSink,
    LLMRequest,
    LLMResponse,
    ProviderAuthError,
    ProviderConfigError,
    ProviderContextOverflow,
    ProviderError,
    ProviderKeyMissing,
    ProviderRateLimited,
    ProviderUnavailable,
)
from agent.providers.fallback import (
    FallbackProvider,
    FallbackSwitch,
    FallbackTarget,
    SwitchReason,
)
from agent.providers.retry import classify_status

Outcome = LLMResponse | ProviderError | tuple[str, ProviderError]  # (text streamed, then error)


class Scripted:
    """An LLMProvider answering from a script; an empty script answers "ok from <name>"."""

    def __init__(self, name: str, *outcomes: Outcome) -> None:
        self.name = name
        self.script: deque[Outcome] = deque(outcomes)
        self.requests: list[LLMRequest] = []

    async def complete(self, request: LLMRequest, on_delta: DeltaSink | None = None) -> LLMResponse:
        self.requests.append(request)
        outcome = self.script.popleft() if self.script else LLMResponse(f"ok from {self.name}")
        if isinstance(outcome, tuple):
            text, error = outcome
            if on_delta is not None:
                await on_delta(text)
            raise error
        if isinstance(outcome, ProviderError):
            raise outcome
        return outcome

    async def aclose(self) -> None:
        pass


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


HISTORY = (ChatMessage.user("hi"),)


def request(cache_key: str | None = "session-1", model: str = "primary-model") -> LLMRequest:
    return LLMRequest(
        model=model,
        messages=HISTORY,
        temperature=1.5,
        max_tokens=9000,
        cache_key=cache_key,
    )


def chain(
    *providers: Scripted, windows: Sequence[int] = (), clock: Clock | None = None
) -> tuple[FallbackProvider, list[FallbackSwitch]]:
    switches: list[FallbackSwitch] = []
    sizes = list(windows) or [100_000] * len(providers)
    targets = [FallbackTarget(providers[0], None, sizes[0])]
    targets += [
        FallbackTarget(p, f"{p.name}-model", size, temperature=0.5, max_tokens=1000)
        for p, size in zip(providers[1:], sizes[1:], strict=True)
    ]
    fallback = FallbackProvider(
        targets, retry_secs=60.0, clock=clock or Clock(), on_switch=switches.append
    )
    return fallback, switches


def rate_limited(retry_after: float | None = 3600.0) -> ProviderRateLimited:
    return ProviderRateLimited("provider 'a': HTTP 429", retry_after)


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (rate_limited(), SwitchReason.RATE_LIMITED),
        (ProviderUnavailable("HTTP 503"), SwitchReason.UNAVAILABLE),
        (classify_status("a", 529, {}, {"error": {"type": "overloaded_error"}}), "unavailable"),
        (classify_status("a", 404, {}, {"error": {"message": "no such model"}}), "model_not_found"),
        (classify_status("a", 403, {}, {}), SwitchReason.PERMISSION),
        (ProviderAuthError("HTTP 401"), SwitchReason.PERMISSION),
    ],
)
async def test_these_errors_go_to_the_next_model(error: ProviderError, reason: str) -> None:
    primary, backup = Scripted("a", error), Scripted("b")
    fallback, switches = chain(primary, backup)
    response = await fallback.complete(request())
    assert response.content == "ok from b"
    assert response.model == "b-model"
    assert switches == [FallbackSwitch("primary-model", "b-model", SwitchReason(reason))]
    # the fallback's own model, temperature and max_tokens; the history as it was
    sent = backup.requests[0]
    assert (sent.model, sent.temperature, sent.max_tokens) == ("b-model", 0.5, 1000)
    assert sent.messages is HISTORY
    assert fallback.answered_by("session-1") == "b-model"


@pytest.mark.parametrize(
    "error",
    [
        ProviderError("provider 'a': HTTP 400 bad request"),
        classify_status("a", 422, {}, {}),
        ProviderConfigError("unknown type"),
        ProviderKeyMissing("a", "OPENAI_API_KEY"),
    ],
)
async def test_the_requests_own_faults_raise_without_a_switch(error: ProviderError) -> None:
    backup = Scripted("b")
    fallback, switches = chain(Scripted("a", error), backup)
    with pytest.raises(type(error)) as raised:
        await fallback.complete(request())
    assert raised.value is error
    assert backup.requests == []
    assert switches == []


async def test_the_models_are_tried_in_order_and_the_first_error_is_raised() -> None:
    first = rate_limited()
    a, b, c = Scripted("a", first), Scripted("b", ProviderUnavailable("503")), Scripted("c")
    fallback, switches = chain(a, b, c)
    assert (await fallback.complete(request())).content == "ok from c"
    assert [(s.from_model, s.to_model) for s in switches] == [
        ("primary-model", "b-model"),
        ("b-model", "c-model"),
    ]
    # all three down now: each is asked once more, then the first error is what the user hears
    a.script.append(first)
    b.script.append(ProviderUnavailable("503"))
    c.script.append(ProviderUnavailable("503"))
    fallback, _ = chain(a, b, c)
    with pytest.raises(ProviderRateLimited) as raised:
        await fallback.complete(request())
    assert raised.value is first


async def test_a_failed_primary_is_skipped_until_its_wait_is_over_then_asked_first() -> None:
    clock = Clock()
    primary, backup = Scripted("a", rate_limited(retry_after=3600)), Scripted("b")
    fallback, switches = chain(primary, backup, clock=clock)
    await fallback.complete(request())
    clock.now += 59  # retry_secs (60) caps the Retry-After of an hour
    response = await fallback.complete(request())
    assert response.content == "ok from b"
    assert len(primary.requests) == 1  # not asked while it waits
    assert switches[-1].reason is SwitchReason.SKIPPED
    clock.now += 2
    response = await fallback.complete(request())
    assert response.content == "ok from a"  # answered again: back to the primary
    assert response.model is None  # the model asked answered
    assert len(primary.requests) == 2
    assert fallback.answered_by("session-1") == "primary-model"
    assert len(switches) == 2  # the failure and the skip; none once it answered


async def test_a_short_retry_after_shortens_the_wait() -> None:
    clock = Clock()
    primary = Scripted("a", ProviderUnavailable("529 overloaded", retry_after=5))
    fallback, _ = chain(primary, Scripted("b"), clock=clock)
    await fallback.complete(request())
    clock.now += 5
    assert (await fallback.complete(request())).content == "ok from a"


async def test_when_every_model_waits_all_are_asked_in_order() -> None:
    clock = Clock()
    a = Scripted("a", rate_limited(), rate_limited())
    b = Scripted("b", ProviderUnavailable("503"))
    fallback, _ = chain(a, b, clock=clock)
    with pytest.raises(ProviderRateLimited):
        await fallback.complete(request())
    clock.now += 1  # both still waiting: asked anyway, rather than failing unasked
    assert (await fallback.complete(request())).content == "ok from b"
    assert (len(a.requests), len(b.requests)) == (2, 2)


async def test_a_reply_already_streamed_is_never_restarted_on_another_model() -> None:
    cut = ProviderUnavailable("stream cut")
    backup = Scripted("b")
    fallback, switches = chain(Scripted("a", ("Half a rep", cut)), backup)
    shown: list[str] = []

    async def sink(text: str) -> None:
        shown.append(text)

    with pytest.raises(ProviderUnavailable) as raised:
        await fallback.complete(request(), sink)
    assert raised.value is cut
    assert shown == ["Half a rep"]
    assert backup.requests == []
    assert switches == []


async def test_a_stream_that_failed_before_any_text_goes_to_the_next_model() -> None:
    fallback, _ = chain(Scripted("a", rate_limited()), Scripted("b"))
    shown: list[str] = []

    async def sink(text: str) -> None:
        shown.append(text)

    assert (await fallback.complete(request(), sink)).content == "ok from b"


async def test_an_overflow_is_compacted_first_then_goes_to_a_larger_window() -> None:
    overflow = ProviderContextOverflow("prompt is too long")
    primary = Scripted("a", overflow, overflow, overflow)
    small, large = Scripted("small"), Scripted("large")
    fallback, switches = chain(primary, small, large, windows=(100_000, 64_000, 200_000))
    # the first overflow raises: the loop compacts and sends it once more
    with pytest.raises(ProviderContextOverflow):
        await fallback.complete(request())
    response = await fallback.complete(request())  # still too long
    assert response.content == "ok from large"
    assert small.requests == []  # a smaller window would not help
    assert switches == [
        FallbackSwitch("primary-model", "large-model", SwitchReason.CONTEXT_OVERFLOW)
    ]
    # later calls of the conversation go to the larger model at once; the
    # primary is not skipped (it is not down), and is asked first
    assert (await fallback.complete(request())).content == "ok from large"
    # once the primary holds the conversation again, an overflow is compacted first
    assert (await fallback.complete(request())).content == "ok from a"
    primary.script.append(overflow)
    with pytest.raises(ProviderContextOverflow):
        await fallback.complete(request())


async def test_an_overflow_without_a_larger_window_raises() -> None:
    overflow = ProviderContextOverflow("prompt is too long")
    backup = Scripted("b")
    fallback, _ = chain(Scripted("a", overflow), backup, windows=(100_000, 100_000))
    with pytest.raises(ProviderContextOverflow) as raised:
        await fallback.complete(request(cache_key=None))  # one-off: no compaction first
    assert raised.value is overflow
    assert backup.requests == []


async def test_the_primary_keeps_the_requests_model_and_settings() -> None:
    primary = Scripted("a")
    fallback, _ = chain(primary, Scripted("b"))
    summary = request(cache_key=None, model="summary-model")
    await fallback.complete(summary)
    assert primary.requests == [summary]
    assert fallback.answered_by("session-1") is None  # one-off requests are not remembered


async def test_each_switch_is_logged_without_message_text() -> None:
    fallback, _ = chain(Scripted("a", rate_limited()), Scripted("b"))
    with capture_logs() as logs:
        await fallback.complete(request())
    [event] = [e for e in logs if e["event"] == "model_fallback"]
    assert event["from_model"] == "primary-model"
    assert event["to_model"] == "b-model"
    assert event["reason"] == "rate_limited"
    assert event["log_level"] == "warning"
    assert "hi" not in str(event.values())
