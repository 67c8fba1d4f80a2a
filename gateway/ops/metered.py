"""A provider wrapper that records LLM latency, failures and tokens in
Metrics, each call as a span of its message's trace (gateway.ops.tracing),
and the counter of model fallbacks (`fallback_counter`)."""

from __future__ import annotations

import time
from collections.abc import Callable

from agent.providers.base import DeltaSink, LLMProvider, LLMRequest, LLMResponse, ProviderError
from agent.providers.fallback import FallbackSwitch
from gateway.ops import tracing
from gateway.ops.metrics import Metrics

__all__ = ["MeteredProvider", "fallback_counter"]


class MeteredProvider:
    def __init__(self, inner: LLMProvider, metrics: Metrics, system: str = "openai") -> None:
        """`system`: the provider's kind (`providers.<name>.type`), `gen_ai.system` in traces."""
        self.inner = inner
        self.name = inner.name
        self.metrics = metrics
        self.system = system

    async def complete(self, request: LLMRequest, on_delta: DeltaSink | None = None) -> LLMResponse:
        started = time.monotonic()
        try:
            with tracing.model_call(self.system, self.name, request) as span:
                response = await self.inner.complete(request, on_delta)
                tracing.model_response(span, request, response)
        except ProviderError:
            self.metrics.llm_failed(self.name)
            raise
        finally:
            self.metrics.llm_latency(self.name, request.model, time.monotonic() - started)
        usage = response.usage
        if usage is not None:
            self.metrics.tokens(request.model, usage.input_tokens, usage.output_tokens)
            self.metrics.input_tokens(
                request.model,
                usage.uncached_input_tokens,
                usage.cache_read_tokens,
                usage.cache_write_tokens,
            )
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


def fallback_counter(provider: LLMProvider, agent: str) -> Callable[[FallbackSwitch], None] | None:
    """What counts an agent's model fallbacks in the metrics `provider` (its
    primary, metered by the composition root) reports to; None when unmetered."""
    if not isinstance(provider, MeteredProvider):
        return None
    metrics = provider.metrics

    def count(switch: FallbackSwitch) -> None:
        metrics.model_fallback(agent, switch.from_model, switch.to_model, switch.reason.value)

    return count
