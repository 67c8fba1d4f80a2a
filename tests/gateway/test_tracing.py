"""When tracing is on, and where spans go (gateway.ops.tracing.target); the
end to end behaviour is tests/e2e/test_traces.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.config.core import ConfigError, ObservabilityConfig
from gateway.config.loading import load_config, parse_config
from gateway.ops.tracing import target

COLLECTOR = "http://127.0.0.1:4318"


def test_off_by_default() -> None:
    assert target(ObservabilityConfig(), {}) == (False, None)


@pytest.mark.parametrize("url", [COLLECTOR, COLLECTOR + "/"])
def test_the_configs_collector_gets_the_traces_path(url: str) -> None:
    assert target(ObservabilityConfig(otlp_endpoint=url), {}) == (True, COLLECTOR + "/v1/traces")


@pytest.mark.parametrize(
    "name", ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
)
def test_the_standard_variable_turns_it_on_and_the_exporter_reads_it(name: str) -> None:
    assert target(ObservabilityConfig(), {name: COLLECTOR}) == (True, None)


def test_otel_sdk_disabled_wins() -> None:
    config = ObservabilityConfig(otlp_endpoint=COLLECTOR)
    env = {"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": COLLECTOR}
    assert target(config, env) == (False, None)


def test_the_environment_comes_through_the_loaded_config(tmp_path: Path) -> None:
    env = {"PICOBOT_HOME": str(tmp_path), "OTEL_EXPORTER_OTLP_ENDPOINT": COLLECTOR, "HOME": "/x"}
    loaded = load_config(environ=env, cwd=tmp_path)
    assert loaded.otel_env == {"OTEL_EXPORTER_OTLP_ENDPOINT": COLLECTOR}
    assert target(loaded.config.observability, loaded.otel_env) == (True, None)


@pytest.mark.parametrize("url", ["127.0.0.1:4318", "grpc://collector:4317", "http://"])
def test_an_endpoint_that_is_not_an_http_url_is_refused(url: str) -> None:
    with pytest.raises(ConfigError, match="otlp_endpoint"):
        parse_config({"observability": {"otlp_endpoint": url}}, {})
