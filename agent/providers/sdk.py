"""What the SDK-backed providers share: lifecycle, the streaming retry rule and a stream's end.

A provider holds one SDK client (none when the API key is missing, so the
missing key is reported per call, not at start-up), refuses calls once closed,
and retries a call only while no streamed text has reached the user.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Generic, Protocol, TypeVar

import structlog

from agent.messages import ToolCall, valid_arguments, valid_unicode
from agent.providers.base import (
    DeltaSink,
    LLMResponse,
    ProviderError,
    ProviderKeyMissing,
    ProviderSettings,
)
from agent.providers.retry import Sleep, with_retries

__all__ = [
    "AFTER_END_SECS",
    "CUT_SHORT",
    "SdkProvider",
    "drain_briefly",
    "missing_key_error",
]

log = structlog.get_logger(__name__)

# How long a stream's body may take to end after its last event ([DONE],
# message_stop); it comes with that event, normally.
AFTER_END_SECS = 0.5

# A stream whose body ended before its reply did: a failed call (retried
# while no text has reached the user), never a reply.
CUT_SHORT = "the stream ended before the reply was complete"


def _valid(response: LLMResponse) -> LLMResponse:
    """A reply whose every text UTF-8 can carry (`valid_unicode`), tool-call
    arguments once read too (`valid_arguments`)."""
    calls, reasoning = response.tool_calls, response.reasoning_content
    texts = (response.content, reasoning or "", *(t for c in calls for t in (c.id, c.name)))
    if all(valid_unicode(text) is text for text in texts) and all(
        valid_arguments(c.arguments) is c.arguments for c in calls
    ):
        return response  # nearly always: as it came
    return dataclasses.replace(
        response,
        content=valid_unicode(response.content),
        tool_calls=tuple(
            ToolCall(valid_unicode(c.id), valid_unicode(c.name), valid_arguments(c.arguments))
            for c in calls
        ),
        reasoning_content=None if reasoning is None else valid_unicode(reasoning),
    )


def missing_key_error(settings: ProviderSettings) -> ProviderKeyMissing:
    where = f"providers.{settings.name}.api_key"
    setting = f"{settings.api_key_hint} ({where})" if settings.api_key_hint else where
    return ProviderKeyMissing(settings.name, setting)


async def drain_briefly(rest: AsyncIterator[object]) -> None:
    """Read what is left of a stream whose reply is already whole, so that its
    connection can be reused: for at most `AFTER_END_SECS`, after which a
    server that holds the response open is cut off instead of holding the
    reply until the read timeout. A failure now only costs the connection."""
    try:
        async with asyncio.timeout(AFTER_END_SECS):
            async for _ in rest:
                pass
    except Exception as exc:  # TimeoutError: held open; or the connection failed
        log.debug("stream_end_not_read", error=type(exc).__name__)


class _Closable(Protocol):
    async def close(self) -> None: ...


C = TypeVar("C", bound=_Closable)


class SdkProvider(Generic[C]):
    def __init__(
        self, settings: ProviderSettings, client: C | None, *, sleep: Sleep = asyncio.sleep
    ) -> None:
        self.name = settings.name
        self._settings = settings
        self._sleep = sleep
        self._client = client
        self._closed = False

    def _client_for_call(self) -> C:
        if self._closed:
            raise ProviderError(f"provider '{self.name}' is closed")
        if self._client is None:
            raise missing_key_error(self._settings)
        return self._client

    async def _with_retries(
        self,
        once: Callable[[DeltaSink | None], Awaitable[LLMResponse]],
        on_delta: DeltaSink | None,
    ) -> LLMResponse:
        """Run `once` (given a sink when streaming) under the retry policy; a
        reply whose text already reached the user is never started again.
        What comes back is valid Unicode (`valid_unicode`), as is each delta
        (`DeltaBatch`)."""
        emitted = False

        async def sink(text: str) -> None:
            nonlocal emitted
            emitted = True
            if on_delta is not None:
                await on_delta(text)

        response = await with_retries(
            lambda: once(sink if on_delta is not None else None),
            settings=self._settings,
            sleep=self._sleep,
            can_retry=lambda: not emitted,
        )
        return _valid(response)

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._client is not None:
            await self._client.close()
