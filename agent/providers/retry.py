"""The one retry policy for LLM calls, shared by every provider.

`with_retries` re-runs a call that failed with ProviderRateLimited or
ProviderUnavailable, up to `settings.max_retries` extra attempts, waiting with
exponential backoff and jitter (base 0.5 s) but never less than the server's
Retry-After; each wait and the sum of waits are capped by
`settings.retry_max_wait_secs`. Every other error raises at once. A streamed call
is only retried while it has not emitted any text (`can_retry`), so a user never
sees a reply start twice. It logs error types and waits, never messages or keys.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TypeVar

import structlog

from agent.providers.base import (
    ProviderAuthError,
    ProviderContextOverflow,
    ProviderError,
    ProviderRateLimited,
    ProviderSettings,
    ProviderUnavailable,
)

__all__ = [
    "BACKOFF_BASE_SECS",
    "backoff_delay",
    "classify_status",
    "is_context_overflow",
    "parse_retry_after",
    "server_message",
    "with_retries",
]

BACKOFF_BASE_SECS = 0.5

T = TypeVar("T")
Sleep = Callable[[float], Awaitable[None]]

log = structlog.get_logger(__name__)


def backoff_delay(attempt: int, retry_after: float | None = None) -> float:
    """Wait before retry number `attempt` (1-based): jittered 0.5·2^(n-1) s, >= retry_after."""
    ceiling = BACKOFF_BASE_SECS * 2.0 ** (attempt - 1)
    jittered = ceiling * (0.5 + random.random() / 2)
    return max(jittered, retry_after or 0.0)


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds from `retry-after-ms`, or `retry-after` as seconds or an HTTP date."""
    if not headers:
        return None
    lowered = {key.lower(): value for key, value in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis is not None:
        try:
            value = float(millis) / 1000
        except ValueError:
            value = math.nan
        if math.isfinite(value) and value >= 0:
            return value
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        try:
            when = parsedate_to_datetime(raw)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return max(0.0, (when - datetime.now(UTC)).total_seconds())
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def server_message(body: object) -> str:
    """The human-readable message inside an API error body (OpenAI or Anthropic shape)."""
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])[:300]
    return ""


def classify_status(
    provider: str, status: int, headers: Mapping[str, str], body: object
) -> ProviderError:
    """Map an HTTP error status to the error tree: what is retried is decided
    here. The error keeps the status (`ProviderError.status`)."""
    error = _error_for_status(provider, status, headers, body)
    error.status = status
    return error


def _error_for_status(
    provider: str, status: int, headers: Mapping[str, str], body: object
) -> ProviderError:
    prefix = f"provider '{provider}'"
    if status in (401, 403):
        # The server's text may echo part of the key: keep it out of the message.
        return ProviderAuthError(f"{prefix}: HTTP {status}, API key rejected")
    detail = f"{prefix}: HTTP {status} {server_message(body)}".rstrip()
    if status == 429:
        return ProviderRateLimited(detail, parse_retry_after(headers))
    if status == 413 or (status == 400 and is_context_overflow(body)):
        return ProviderContextOverflow(detail)
    if status >= 500 or status in (408, 409):
        return ProviderUnavailable(detail, parse_retry_after(headers))
    return ProviderError(detail)


# how OpenAI(-compatible) and Anthropic services word "the prompt is too long"
_OVERFLOW_CODES = frozenset({"context_length_exceeded", "request_too_large"})
_OVERFLOW_PHRASES = (
    "context length",
    "context window",
    "context_length",
    "maximum context",
    "prompt is too long",
    "too many tokens",
    "request too large",
)


def is_context_overflow(body: object) -> bool:
    """Whether an error body says the prompt is too long for the model."""
    inner = body.get("error", body) if isinstance(body, dict) else None
    if not isinstance(inner, dict):
        return False
    if inner.get("code") in _OVERFLOW_CODES or inner.get("type") in _OVERFLOW_CODES:
        return True
    message = server_message(body).lower()
    return any(phrase in message for phrase in _OVERFLOW_PHRASES)


def _always() -> bool:
    return True


async def with_retries(
    call: Callable[[], Awaitable[T]],
    *,
    settings: ProviderSettings,
    sleep: Sleep = asyncio.sleep,
    can_retry: Callable[[], bool] = _always,
) -> T:
    """Run `call`, retrying retryable provider errors under the settings' budget."""
    attempt = 0
    waited = 0.0
    while True:
        try:
            return await call()
        except (ProviderRateLimited, ProviderUnavailable) as exc:
            attempt += 1
            budget = settings.retry_max_wait_secs - waited
            if attempt > settings.max_retries or budget <= 0 or not can_retry():
                raise
            wait = min(backoff_delay(attempt, exc.retry_after), budget)
            log.warning(
                "llm_retry",
                provider=settings.name,
                attempt=attempt,
                max_retries=settings.max_retries,
                wait_secs=round(wait, 3),
                retry_after=exc.retry_after,
                error=type(exc).__name__,
            )
            await sleep(wait)
            waited += wait
