"""A session's token use and what it cost, as /status shows them.

The totals come from storage (`storage.sql.conversations.commands.session_stats`, summed in
SQL over every message of the session, compaction summaries included); the
prices from `models.<name>.prices` of the chat's agent's model. The cost is an
estimate: the provider's invoice is the truth (rounding, tiers, discounts).
When the agent has fallback models and one of them answered the session's
last model call, a line names it (kept in memory: forgotten on restart);
while tracing is on, a line names the trace of the chat's last turn
(gateway.ops.tracing; in memory too).
"""

from __future__ import annotations

from agent.providers.fallback import FallbackProvider
from gateway.i18n import Locale, Msg, tr
from gateway.ops import tracing
from gateway.turns.agents import AgentProfile
from storage.sql.conversations.commands import SessionStats

__all__ = ["usage_status"]


def usage_status(stats: SessionStats, profile: AgentProfile, locale: Locale) -> str:
    """The /status lines about tokens (and cost, when the model has prices),
    and the trace of the chat's last turn while tracing is on."""
    tokens = stats.tokens
    trace_id = tracing.last_trace_id(stats.record.channel, stats.record.chat_id)
    trace = [tr(locale, Msg.USAGE_TRACE, trace_id=trace_id)] if trace_id else []
    if not tokens.input_tokens and not tokens.output_tokens:
        return "\n".join([tr(locale, Msg.USAGE_NONE), *trace])
    share = tokens.cache_read_tokens / tokens.input_tokens if tokens.input_tokens else 0.0
    lines = [
        tr(
            locale,
            Msg.USAGE_TOKENS,
            input=tokens.input_tokens,
            output=tokens.output_tokens,
            share=share,
            read=tokens.cache_read_tokens,
            written=tokens.cache_write_tokens,
        )
    ]
    if profile.prices is not None:
        cost = profile.prices.cost(tokens)
        lines.append(
            tr(
                locale,
                Msg.USAGE_COST,
                cost=cost,
                currency=profile.prices.currency,
                model=profile.loop.model,
            )
        )
    provider = _fallbacks(profile.provider)
    if provider is not None:
        answered = provider.answered_by(stats.record.id)
        if answered is not None and answered != profile.loop.model:
            lines.append(tr(locale, Msg.USAGE_FALLBACK, model=answered, primary=profile.loop.model))
    return "\n".join([*lines, *trace])


def _fallbacks(provider: object) -> FallbackProvider | None:
    """The FallbackProvider inside the wrappers around an agent's provider
    (the budget check's, the metrics'): each keeps what it wraps as `inner`."""
    while provider is not None and not isinstance(provider, FallbackProvider):
        provider = getattr(provider, "inner", None)
    return provider
