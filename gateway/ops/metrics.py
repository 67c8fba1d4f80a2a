"""Prometheus metrics of one gateway: the series behind GET /metrics.

`Metrics` owns its own `CollectorRegistry` (never the process-global one, so
two gateways in one test process do not collide) and exposes one method per
event the pipeline reports. Every series is named `picobot_…`. Labels are
bounded sets (channel names, configured providers and models, queue names,
run statuses): never put a chat id, user id or message text in a label.
"""

from __future__ import annotations

from typing import Any, Final

from prometheus_client import (
    CONTENT_TYPE_PLAIN_0_0_4,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
)

__all__ = ["LATENCY_BUCKETS", "LLM_BUCKETS", "Metrics"]

# Seconds. A turn includes tool calls, so it reaches minutes.
LATENCY_BUCKETS: Final = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
LLM_BUCKETS: Final = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 40.0, 60.0, 120.0)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        reg = self.registry
        self._inbound = Counter(
            "picobot_inbound_messages",
            "Inbound messages accepted from a channel (after deduplication).",
            ["channel"],
            registry=reg,
        )
        self._sent = Counter(
            "picobot_outbound_sent",
            "Outbound messages delivered to a channel.",
            ["channel"],
            registry=reg,
        )
        self._failed = Counter(
            "picobot_outbound_failed",
            "Outbound messages given up on (outbox row marked failed).",
            ["channel"],
            registry=reg,
        )
        self._dead_letters = Counter(
            "picobot_dead_letters",
            "Inbound events that could not be parsed or recorded, kept as dead letters.",
            ["channel"],
            registry=reg,
        )
        self._retries = Counter(
            "picobot_outbound_retries",
            "Outbound send attempts that will be retried.",
            ["channel"],
            registry=reg,
        )
        self._turn = Histogram(
            "picobot_turn_duration_seconds",
            "Time from the start of a turn to its reply being queued.",
            ["channel"],
            buckets=LATENCY_BUCKETS,
            registry=reg,
        )
        self._llm = Histogram(
            "picobot_llm_request_duration_seconds",
            "Duration of one LLM provider call.",
            ["provider", "model"],
            buckets=LLM_BUCKETS,
            registry=reg,
        )
        self._llm_failed = Counter(
            "picobot_llm_failures",
            "LLM provider calls that raised (after the provider's own retries).",
            ["provider"],
            registry=reg,
        )
        self._fallbacks = Counter(
            "picobot_model_fallback",
            "LLM calls an agent sent to a later model of its list, by the model that "
            "failed (or was being skipped after failing) and the one asked instead.",
            ["agent", "from_model", "to_model", "reason"],
            registry=reg,
        )
        self._rate_limited = Counter(
            "picobot_rate_limited",
            "Messages answered with a rate-limit reply instead of a turn (limits.sender), "
            "by channel and the rate they went over.",
            ["channel", "limit"],
            registry=reg,
        )
        self._tokens = Counter(
            "picobot_llm_tokens",
            "Tokens reported by the provider.",
            ["model", "direction"],
            registry=reg,
        )
        self._input = Counter(
            "picobot_llm_input_tokens",
            "Input tokens by prompt-cache use: read from the cache, written to it, or neither.",
            ["model", "cache"],
            registry=reg,
        )
        self._queue = Gauge(
            "picobot_queue_depth",
            "Items waiting in an internal queue.",
            ["queue"],
            registry=reg,
        )
        self._sessions = Gauge(
            "picobot_active_sessions",
            "Sessions with a turn running or queued.",
            registry=reg,
        )
        self._outbox = Gauge(
            "picobot_outbox_rows",
            "Outbox rows not delivered, by state.",
            ["state"],
            registry=reg,
        )
        self._scheduler = Counter(
            "picobot_scheduler_runs",
            "Scheduled job runs, by outcome.",
            ["status"],
            registry=reg,
        )
        self._ready = Gauge(
            "picobot_channel_ready",
            "1 when the channel is connected and able to receive, else 0.",
            ["channel"],
            registry=reg,
        )
        self._mcp_up = Gauge(
            "picobot_mcp_server_up",
            "1 when the MCP server is connected and its tools are offered, else 0.",
            ["server"],
            registry=reg,
        )
        self._mcp_tools = Gauge(
            "picobot_mcp_tools",
            "Tools the MCP server offers now.",
            ["server"],
            registry=reg,
        )
        self._mcp_calls = Counter(
            "picobot_mcp_calls",
            "MCP tool calls, by outcome (ok, error, unavailable).",
            ["server", "outcome"],
            registry=reg,
        )
        self._mcp_latency = Histogram(
            "picobot_mcp_call_duration_seconds",
            "Duration of one MCP tool call.",
            ["server"],
            buckets=LLM_BUCKETS,
            registry=reg,
        )
        self._degraded = Gauge(
            "picobot_channel_send_degraded",
            "1 while the channel's platform does not answer sends (replies wait), else 0.",
            ["channel"],
            registry=reg,
        )
        self._leases = Gauge(
            "picobot_worker_leases",
            "Leases this worker holds (several workers on one database), by kind: chat, channel.",
            ["kind"],
            registry=reg,
        )
        # Memory, CPU and file descriptors of this process (Linux /proc; empty elsewhere).
        ProcessCollector(namespace="picobot", registry=reg)
        # labels() hashes and locks on every call; the hot series are looked up once
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        self._spend_tokens = Counter(
            "picobot_spend_tokens",
            "Tokens (input + output) of model calls, charged to budgets.",
            ["agent", "channel", "model"],
            registry=reg,
        )
        self._spend_cost = Counter(
            "picobot_spend_cost",
            "Cost of model calls at models.<name>.prices (calls of models without prices add 0).",
            ["agent", "channel", "model"],
            registry=reg,
        )
        self._budget_refused = Counter(
            "picobot_spend_budget_refused",
            "Turns and model calls refused because a budget was used up.",
            ["scope", "field"],
            registry=reg,
        )

    def _child(self, metric: Any, *values: str) -> Any:
        key = (id(metric), values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    # -- counters ------------------------------------------------------------
    def inbound(self, channel: str) -> None:
        self._child(self._inbound, channel).inc()

    def dead_letter(self, channel: str) -> None:
        self._child(self._dead_letters, channel).inc()

    def outbound_sent(self, channel: str) -> None:
        self._child(self._sent, channel).inc()

    def outbound_failed(self, channel: str, count: int = 1) -> None:
        self._failed.labels(channel=channel).inc(count)

    def outbound_retry(self, channel: str) -> None:
        self._retries.labels(channel=channel).inc()

    def tokens(self, model: str, input: int, output: int) -> None:
        if input > 0:
            self._child(self._tokens, model, "input").inc(input)
        if output > 0:
            self._child(self._tokens, model, "output").inc(output)

    def input_tokens(self, model: str, uncached: int, cache_read: int, cache_write: int) -> None:
        """One call's input split by cache use (the hit rate is read / all)."""
        for kind, n in (("none", uncached), ("read", cache_read), ("write", cache_write)):
            if n > 0:
                self._child(self._input, model, kind).inc(n)

    def llm_failed(self, provider: str) -> None:
        self._llm_failed.labels(provider=provider).inc()

    def model_fallback(self, agent: str, from_model: str, to_model: str, reason: str) -> None:
        self._child(self._fallbacks, agent, from_model, to_model, reason).inc()

    def rate_limited(self, channel: str, limit: str) -> None:
        self._child(self._rate_limited, channel, limit).inc()

    def spend(self, agent: str, channel: str, model: str, tokens: int, cost: float | None) -> None:
        self._child(self._spend_tokens, agent, channel or "-", model).inc(tokens)
        self._child(self._spend_cost, agent, channel or "-", model).inc(cost or 0.0)

    def budget_refused(self, scope: str, field: str) -> None:
        self._child(self._budget_refused, scope, field).inc()

    def scheduler_run(self, status: str) -> None:
        self._scheduler.labels(status=status).inc()

    def mcp_call(self, server: str, outcome: str, seconds: float) -> None:
        self._child(self._mcp_calls, server, outcome).inc()
        self._child(self._mcp_latency, server).observe(max(0.0, seconds))

    # -- histograms ----------------------------------------------------------
    def turn_latency(self, channel: str, seconds: float) -> None:
        self._child(self._turn, channel).observe(max(0.0, seconds))

    def llm_latency(self, provider: str, model: str, seconds: float) -> None:
        self._child(self._llm, provider, model).observe(max(0.0, seconds))

    # -- gauges --------------------------------------------------------------
    def set_queue_depth(self, name: str, n: int) -> None:
        self._queue.labels(queue=name).set(n)

    def set_active_sessions(self, n: int) -> None:
        self._sessions.set(n)

    def set_outbox(self, pending: int, failed: int, parked: int = 0) -> None:
        """Undelivered rows: pending (to send), failed (gave up), parked (recipient offline)."""
        self._outbox.labels(state="pending").set(pending)
        self._outbox.labels(state="failed").set(failed)
        self._outbox.labels(state="parked").set(parked)

    def set_channel_ready(self, channel: str, ready: bool) -> None:
        self._ready.labels(channel=channel).set(1 if ready else 0)

    def set_mcp_server(self, server: str, up: bool, tools: int) -> None:
        self._mcp_up.labels(server=server).set(1 if up else 0)
        self._mcp_tools.labels(server=server).set(tools)

    def set_worker_leases(self, counts: dict[str, int]) -> None:
        for kind, count in counts.items():
            self._leases.labels(kind=kind).set(count)

    def set_channel_send_degraded(self, channel: str, degraded: bool) -> None:
        self._degraded.labels(channel=channel).set(1 if degraded else 0)

    # -- exposition ------------------------------------------------------------
    def render(self) -> tuple[bytes, str]:
        """The Prometheus text exposition and its Content-Type, for GET /metrics.

        Labelled text format 0.0.4, as prometheus_client's own exporter answers
        a scraper that does not ask for more: every scraper understands it, and
        with our legacy-safe names the body is the same. Set the header
        verbatim: aiohttp's `content_type=` argument rejects a charset.
        """
        return generate_latest(self.registry), CONTENT_TYPE_PLAIN_0_0_4
