"""Model fallback: one `LLMProvider` over an agent's ordered list of models.

`agents.<name>.fallbacks` names further models, on any provider, tried in
order when the one before fails in a way another model can help with:

- rate limited (429) after the provider's own retries (`with_retries`);
- unavailable: 5xx, Anthropic's 529 overload, a timeout, a broken connection;
- a model the service does not have (404) or a key it refuses (401/403).

Any other error (a bad request, a reply it could not read, a missing key) is
the request's or the setup's fault: it raises as it came, no other model is
tried. A model that failed is skipped for `retry_secs` (shorter if its
Retry-After says so), then tried again first: turns go back to the primary
once it answers. If every model is being skipped, all are tried in order.

A request too long for a model (`ProviderContextOverflow`): the agent loop
compacts and sends it once more (agent.loop); if that overflows too, the
next model whose context window is larger is tried. The first overflow of a
conversation (`LLMRequest.cache_key`) is therefore raised as it came, the
next one falls back; a one-off request (no cache_key) falls back at once.

Streaming: a model that failed after text of its reply reached the user is
not replaced (the user would see a reply start twice); its error raises.

The history is provider-neutral (`ChatMessage`), so each provider converts
it, tool calls made by the other provider included. Each switch is logged
(`model_fallback`: from, to, reason; never a message or a key) and reported
to `on_switch` (a metric). A fallback's model id is on its response
(`LLMResponse.model`, for its prices); the model that answered a
conversation's last request is in `answered_by` (/status).
It never sleeps and starts no task.
"""

from __future__ import annotations

import dataclasses
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

import structlog

from agent.providers.base import (
    DeltaSink,
    LLMProvider,
    LLMRequest,
    LLMResponse,
    ProviderAuthError,
    ProviderContextOverflow,
    ProviderError,
    ProviderRateLimited,
    ProviderUnavailable,
)

__all__ = [
    "DEFAULT_RETRY_SECS",
    "FallbackProvider",
    "FallbackSwitch",
    "FallbackTarget",
    "SwitchReason",
    "switch_reason",
]

log = structlog.get_logger(__name__)

DEFAULT_RETRY_SECS: Final = 60.0
# how many conversations `answered_by` and the overflow marks remember
_REMEMBERED: Final = 1024


class SwitchReason(StrEnum):
    RATE_LIMITED = "rate_limited"
    UNAVAILABLE = "unavailable"
    MODEL_NOT_FOUND = "model_not_found"
    PERMISSION = "permission"
    CONTEXT_OVERFLOW = "context_overflow"
    SKIPPED = "skipped"  # failed a moment ago: not asked until its wait is over


@dataclass(frozen=True, slots=True)
class FallbackTarget:
    """One model of the list. `model` None: the request's own model (the
    primary, so that a compaction summary keeps its `summary_model`); a
    fallback's `temperature` and `max_tokens` replace the request's."""

    provider: LLMProvider
    model: str | None
    context_window_tokens: int
    temperature: float | None = None
    max_tokens: int | None = None

    def request_for(self, request: LLMRequest) -> LLMRequest:
        if self.model is None:
            return request
        return dataclasses.replace(
            request, model=self.model, temperature=self.temperature, max_tokens=self.max_tokens
        )


@dataclass(frozen=True, slots=True)
class FallbackSwitch:
    from_model: str
    to_model: str
    reason: SwitchReason


def switch_reason(exc: ProviderError) -> SwitchReason | None:
    """Why another model may answer what `exc` refused; None: it may not."""
    if isinstance(exc, ProviderRateLimited):
        return SwitchReason.RATE_LIMITED
    if isinstance(exc, ProviderUnavailable):
        return SwitchReason.UNAVAILABLE
    if isinstance(exc, ProviderAuthError):
        return SwitchReason.PERMISSION
    if isinstance(exc, ProviderContextOverflow):
        return SwitchReason.CONTEXT_OVERFLOW
    if exc.status == 404:
        return SwitchReason.MODEL_NOT_FOUND
    return None


def _wait_of(exc: ProviderError, retry_secs: float) -> float:
    retry_after = getattr(exc, "retry_after", None)
    if isinstance(retry_after, int | float) and retry_after > 0:
        return min(float(retry_after), retry_secs)
    return retry_secs


class FallbackProvider:
    def __init__(
        self,
        targets: Sequence[FallbackTarget],
        *,
        retry_secs: float = DEFAULT_RETRY_SECS,
        clock: Callable[[], float] = time.monotonic,
        on_switch: Callable[[FallbackSwitch], None] | None = None,
    ) -> None:
        """`targets`: the primary first. `clock`: monotonic seconds."""
        if not targets:
            raise ValueError("a FallbackProvider needs at least one target")
        self._targets = tuple(targets)
        self.name = self._targets[0].provider.name
        self._retry_secs = retry_secs
        self._clock = clock
        self._on_switch = on_switch
        self._skip_until = [0.0] * len(self._targets)
        self._answered: OrderedDict[str, str] = OrderedDict()
        self._overflowed: OrderedDict[str, None] = OrderedDict()

    def answered_by(self, conversation: str) -> str | None:
        """The model that answered this conversation's last request (since start)."""
        return self._answered.get(conversation)

    async def complete(self, request: LLMRequest, on_delta: DeltaSink | None = None) -> LLMResponse:
        emitted = False

        async def sink(text: str) -> None:
            nonlocal emitted
            emitted = True
            assert on_delta is not None
            await on_delta(text)

        now = self._clock()
        order = [i for i, until in enumerate(self._skip_until) if until <= now]
        if not order:  # every one failed a moment ago: ask them all rather than none
            order = list(range(len(self._targets)))
        previous: tuple[str, SwitchReason] | None = None
        if order[0] != 0:
            previous = (self._model_of(0, request), SwitchReason.SKIPPED)
        overflowed_window: int | None = None
        error: ProviderError | None = None
        for i in order:
            target = self._targets[i]
            if overflowed_window is not None and target.context_window_tokens <= overflowed_window:
                continue
            model = self._model_of(i, request)
            if previous is not None:
                self._switched(FallbackSwitch(previous[0], model, previous[1]))
            try:
                response = await target.provider.complete(
                    target.request_for(request), sink if on_delta is not None else None
                )
            except ProviderError as exc:
                reason = switch_reason(exc)
                if reason is None or emitted:
                    raise
                if reason is SwitchReason.CONTEXT_OVERFLOW:
                    if not self._may_outgrow(request.cache_key):
                        raise
                    overflowed_window = max(overflowed_window or 0, target.context_window_tokens)
                else:
                    self._skip_until[i] = self._clock() + _wait_of(exc, self._retry_secs)
                error = error or exc
                previous = (model, reason)
                continue
            self._skip_until[i] = 0.0
            self._answered_now(request.cache_key, model, primary=i == 0)
            if model != request.model:
                response.model = model  # LLMResponse.model: set when not the one asked
            return response
        assert error is not None  # the first model asked is never skipped by its window
        raise error  # the first model's: what the user is told

    def _model_of(self, i: int, request: LLMRequest) -> str:
        return self._targets[i].model or request.model

    def _may_outgrow(self, conversation: str | None) -> bool:
        """Whether an overflow may go to a larger model now: a one-off
        request, or a conversation whose first overflow was compacted already."""
        if conversation is None or conversation in self._overflowed:
            return True
        self._overflowed[conversation] = None
        while len(self._overflowed) > _REMEMBERED:
            self._overflowed.popitem(last=False)
        return False

    def _answered_now(self, conversation: str | None, model: str, *, primary: bool) -> None:
        if conversation is None:
            return
        if primary:  # the primary holds it again: a later overflow is compacted first
            self._overflowed.pop(conversation, None)
        self._answered[conversation] = model
        self._answered.move_to_end(conversation)
        while len(self._answered) > _REMEMBERED:
            self._answered.popitem(last=False)

    def _switched(self, switch: FallbackSwitch) -> None:
        # a skip repeats on every call until the wait is over: its log is quieter
        level = log.debug if switch.reason is SwitchReason.SKIPPED else log.warning
        level(
            "model_fallback",
            provider=self.name,
            from_model=switch.from_model,
            to_model=switch.to_model,
            reason=switch.reason.value,
        )
        if self._on_switch is not None:
            self._on_switch(switch)

    async def aclose(self) -> None:
        """The targets' providers are shared (`providers.<name>`): their owner closes them."""
