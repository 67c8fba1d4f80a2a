"""The shared retry policy: what is retried, how long it waits, when it gives up."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from structlog.testing import capture_logs

from agent.providers.base import (
    ProviderAuthError,
    ProviderConfigError,
    ProviderContextOverflow,
    ProviderError,
    ProviderRateLimited,
    ProviderSettings,
    ProviderUnavailable,
)
from agent.providers.retry import classify_status, parse_retry_after, with_retries


class Waits:
    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


class Flaky:
    """A call that raises the given errors in order, then returns "ok"."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


def settings(**overrides: float) -> ProviderSettings:
    fields: dict[str, object] = {"name": "p", "api_key": "sk-secret-in-settings"}
    fields.update(overrides)
    return ProviderSettings(**fields)  # type: ignore[arg-type]


async def test_rate_limit_waits_exactly_retry_after_then_succeeds() -> None:
    waits = Waits()
    call = Flaky(ProviderRateLimited("429", retry_after=2.5))
    assert await with_retries(call, settings=settings(), sleep=waits) == "ok"
    assert call.calls == 2
    assert waits.waits == [2.5]


async def test_backoff_grows_exponentially_with_jitter() -> None:
    waits = Waits()
    call = Flaky(*(ProviderUnavailable("503") for _ in range(4)))
    assert await with_retries(call, settings=settings(max_retries=4), sleep=waits) == "ok"
    assert len(waits.waits) == 4
    for attempt, wait in enumerate(waits.waits):
        ceiling = 0.5 * 2**attempt
        assert ceiling / 2 <= wait <= ceiling


async def test_gives_up_after_max_retries_with_the_last_error() -> None:
    waits = Waits()
    last = ProviderUnavailable("still down")
    call = Flaky(ProviderUnavailable("down"), ProviderUnavailable("down"), last)
    with pytest.raises(ProviderUnavailable) as caught:
        await with_retries(call, settings=settings(max_retries=2), sleep=waits)
    assert caught.value is last
    assert call.calls == 3
    assert len(waits.waits) == 2


async def test_one_wait_is_capped_and_the_budget_ends_retries() -> None:
    waits = Waits()
    call = Flaky(*(ProviderRateLimited("429", retry_after=100) for _ in range(3)))
    with pytest.raises(ProviderRateLimited):
        await with_retries(call, settings=settings(retry_max_wait_secs=5.0), sleep=waits)
    assert waits.waits == [5.0]
    assert call.calls == 2


async def test_total_wait_never_exceeds_the_cap() -> None:
    waits = Waits()
    call = Flaky(*(ProviderUnavailable("503", retry_after=0.4) for _ in range(10)))
    with pytest.raises(ProviderUnavailable):
        await with_retries(
            call, settings=settings(max_retries=10, retry_max_wait_secs=1.0), sleep=waits
        )
    assert sum(waits.waits) == pytest.approx(1.0)
    assert call.calls < 11


@pytest.mark.parametrize(
    "error",
    [
        ProviderError("400 bad request"),
        ProviderAuthError("401"),
        ProviderConfigError("no key"),
        ValueError("a bug"),
    ],
)
async def test_other_errors_raise_at_once(error: Exception) -> None:
    waits = Waits()
    call = Flaky(error)
    with pytest.raises(type(error)):
        await with_retries(call, settings=settings(), sleep=waits)
    assert call.calls == 1
    assert waits.waits == []


async def test_no_retry_once_the_stream_has_emitted_text() -> None:
    waits = Waits()
    call = Flaky(ProviderUnavailable("mid-stream"))
    with pytest.raises(ProviderUnavailable):
        await with_retries(call, settings=settings(), sleep=waits, can_retry=lambda: False)
    assert call.calls == 1
    assert waits.waits == []


async def test_zero_max_retries_means_one_attempt() -> None:
    call = Flaky(ProviderRateLimited("429", retry_after=1))
    with pytest.raises(ProviderRateLimited):
        await with_retries(call, settings=settings(max_retries=0), sleep=Waits())
    assert call.calls == 1


async def test_cancellation_is_never_retried() -> None:
    call = Flaky(asyncio.CancelledError())
    with pytest.raises(asyncio.CancelledError):
        await with_retries(call, settings=settings(), sleep=Waits())
    assert call.calls == 1


async def test_each_retry_is_logged_without_secrets() -> None:
    call = Flaky(ProviderRateLimited("429 for sk-secret-in-settings", retry_after=1))
    with capture_logs() as logs:
        await with_retries(call, settings=settings(), sleep=Waits())
    retries = [entry for entry in logs if entry["event"] == "llm_retry"]
    assert len(retries) == 1
    assert retries[0]["provider"] == "p"
    assert retries[0]["attempt"] == 1
    assert retries[0]["wait_secs"] == 1.0
    assert retries[0]["error"] == "ProviderRateLimited"
    assert "sk-secret" not in repr(logs)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After": "1"}, 1.0),
        ({"retry-after": "2.5"}, 2.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"Retry-After": "soon"}, None),
        ({"Retry-After": "-3"}, None),
        ({}, None),
        (None, None),
    ],
)
def test_parse_retry_after_seconds(headers: dict[str, str] | None, expected: float | None) -> None:
    assert parse_retry_after(headers) == expected


def test_parse_retry_after_http_date() -> None:
    future = datetime.now(UTC) + timedelta(seconds=30)
    parsed = parse_retry_after({"Retry-After": format_datetime(future, usegmt=True)})
    assert parsed is not None
    assert 28 <= parsed <= 30
    past = datetime.now(UTC) - timedelta(minutes=5)
    assert parse_retry_after({"Retry-After": format_datetime(past, usegmt=True)}) == 0.0


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (401, ProviderAuthError),
        (403, ProviderAuthError),
        (429, ProviderRateLimited),
        (500, ProviderUnavailable),
        (503, ProviderUnavailable),
        (529, ProviderUnavailable),
        (408, ProviderUnavailable),
        (400, ProviderError),
        (404, ProviderError),
        (422, ProviderError),
        (413, ProviderContextOverflow),
    ],
)
def test_classify_status(status: int, kind: type[ProviderError]) -> None:
    error = classify_status("p", status, {"Retry-After": "3"}, {"error": {"message": "why"}})
    assert type(error) is kind
    if isinstance(error, ProviderRateLimited | ProviderUnavailable):
        assert error.retry_after == 3.0
    if kind is not ProviderAuthError:
        assert str(error) == f"provider 'p': HTTP {status} why"


@pytest.mark.parametrize(
    "error",
    [
        {"message": "x", "code": "context_length_exceeded"},  # OpenAI
        {"message": "This model's maximum context length is 8192 tokens."},
        {"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens"},
        {"type": "request_too_large", "message": "Request exceeds the maximum size"},
    ],
)
def test_a_context_length_error_is_an_overflow(error: dict[str, str]) -> None:
    assert type(classify_status("p", 400, {}, {"error": error})) is ProviderContextOverflow


def test_other_bad_requests_are_not_an_overflow() -> None:
    body = {"error": {"message": "Invalid value for 'temperature'", "code": None}}
    assert type(classify_status("p", 400, {}, body)) is ProviderError
