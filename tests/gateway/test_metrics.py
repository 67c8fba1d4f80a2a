"""Metrics: the series the pipeline reports come out of render() as parsed Prometheus text."""

from __future__ import annotations

from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from gateway.ops.metrics import Metrics

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(metrics: Metrics) -> tuple[Samples, dict[str, str]]:
    body, content_type = metrics.render()
    assert content_type == "text/plain; version=0.0.4; charset=utf-8"
    samples: Samples = {}
    types: dict[str, str] = {}
    for family in text_string_to_metric_families(body.decode("utf-8")):
        types[family.name] = family.type
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples, types


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


def test_counters_count_by_channel() -> None:
    m = Metrics()
    for _ in range(3):
        m.inbound("telegram")
    m.inbound("feishu")
    m.outbound_sent("telegram")
    m.outbound_sent("telegram")
    m.outbound_failed("wechat")
    m.outbound_retry("wechat")
    m.outbound_retry("wechat")
    m.scheduler_run("ok")
    m.scheduler_run("error")
    m.scheduler_run("ok")

    samples, types = scrape(m)
    assert value(samples, "picobot_inbound_messages_total", channel="telegram") == 3
    assert value(samples, "picobot_inbound_messages_total", channel="feishu") == 1
    assert value(samples, "picobot_outbound_sent_total", channel="telegram") == 2
    assert value(samples, "picobot_outbound_failed_total", channel="wechat") == 1
    assert value(samples, "picobot_outbound_retries_total", channel="wechat") == 2
    assert value(samples, "picobot_scheduler_runs_total", status="ok") == 2
    assert value(samples, "picobot_scheduler_runs_total", status="error") == 1
    assert types["picobot_inbound_messages"] == "counter"
    assert ("picobot_outbound_sent_total", frozenset({("channel", "feishu")})) not in samples


def test_latency_histograms_and_tokens() -> None:
    m = Metrics()
    m.turn_latency("websocket", 0.3)
    m.turn_latency("websocket", 7.0)
    m.llm_latency("default", "gpt-4o-mini", 1.5)
    m.llm_failed("default")
    m.llm_failed("default")
    m.tokens("gpt-4o-mini", 120, 30)
    m.tokens("gpt-4o-mini", 80, 0)

    samples, types = scrape(m)
    assert types["picobot_turn_duration_seconds"] == "histogram"
    assert value(samples, "picobot_turn_duration_seconds_count", channel="websocket") == 2
    assert value(samples, "picobot_turn_duration_seconds_sum", channel="websocket") == 7.3
    assert (
        value(samples, "picobot_turn_duration_seconds_bucket", channel="websocket", le="0.5") == 1
    )
    assert (
        value(samples, "picobot_turn_duration_seconds_bucket", channel="websocket", le="10.0") == 2
    )
    llm = {"provider": "default", "model": "gpt-4o-mini"}
    assert value(samples, "picobot_llm_request_duration_seconds_count", **llm) == 1
    assert value(samples, "picobot_llm_request_duration_seconds_bucket", le="1.0", **llm) == 0
    assert value(samples, "picobot_llm_request_duration_seconds_bucket", le="2.0", **llm) == 1
    assert value(samples, "picobot_llm_failures_total", provider="default") == 2
    tokens = "picobot_llm_tokens_total"
    assert value(samples, tokens, model="gpt-4o-mini", direction="input") == 200
    assert value(samples, tokens, model="gpt-4o-mini", direction="output") == 30


def test_gauges_hold_the_last_value() -> None:
    m = Metrics()
    m.set_queue_depth("inbound", 5)
    m.set_queue_depth("inbound", 2)
    m.set_queue_depth("outbound", 9)
    m.set_active_sessions(4)
    m.set_outbox(pending=7, failed=1, parked=3)
    m.set_channel_ready("telegram", True)
    m.set_channel_ready("feishu", True)
    m.set_channel_ready("feishu", False)

    samples, _ = scrape(m)
    assert value(samples, "picobot_queue_depth", queue="inbound") == 2
    assert value(samples, "picobot_queue_depth", queue="outbound") == 9
    assert value(samples, "picobot_active_sessions") == 4
    assert value(samples, "picobot_outbox_rows", state="pending") == 7
    assert value(samples, "picobot_outbox_rows", state="failed") == 1
    assert value(samples, "picobot_outbox_rows", state="parked") == 3
    assert value(samples, "picobot_channel_ready", channel="telegram") == 1
    assert value(samples, "picobot_channel_ready", channel="feishu") == 0


def test_every_series_is_prefixed_and_registries_are_private() -> None:
    first, second = Metrics(), Metrics()  # two gateways in one process do not collide
    first.inbound("telegram")
    samples, _ = scrape(first)
    assert samples
    assert all(name.startswith("picobot_") for name, _labels in samples)
    other, _ = scrape(second)
    assert ("picobot_inbound_messages_total", frozenset({("channel", "telegram")})) not in other
    global_names = {family.name for family in REGISTRY.collect()}
    assert "picobot_inbound_messages" not in global_names


def test_a_degraded_channel_and_rows_given_up_at_once() -> None:
    m = Metrics()
    m.set_channel_send_degraded("telegram", True)
    m.set_channel_send_degraded("feishu", False)
    m.outbound_failed("telegram", 3)
    samples, types = scrape(m)
    assert types["picobot_channel_send_degraded"] == "gauge"
    assert value(samples, "picobot_channel_send_degraded", channel="telegram") == 1
    assert value(samples, "picobot_channel_send_degraded", channel="feishu") == 0
    assert value(samples, "picobot_outbound_failed_total", channel="telegram") == 3
