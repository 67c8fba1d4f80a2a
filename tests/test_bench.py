"""`make bench` still runs: each scenario end to end at a tiny size. The
figures themselves are never asserted (DESIGN §10); only that every message
was answered and the results hang together."""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import aiohttp
import orjson
import pytest

from bench import (
    fake_llm,
    fanout,
    history,
    memory_search,
    paired,
    providers,
    ready_floor,
    real_path,
    real_postgres,
    startup,
    sustained,
)
from bench.__main__ import per_calibration


async def test_sustained_scenario_answers_every_message_and_measures_the_ceiling() -> None:
    result = await sustained.run(clients=2, seconds=0.5, ceiling_secs=0.5)
    assert result["messages"] > 0
    assert result["answered_in_all"] >= result["messages"]
    assert result["gateway_cpu_ms_per_message"] > 0
    parts = result["event_loop_cpu_ms_per_message"] + result["other_threads_cpu_ms_per_message"]
    assert abs(parts - result["gateway_cpu_ms_per_message"]) < 0.01
    assert result["bare_websocket"]["messages_per_sec"] > 0


async def test_fanout_scenario_gets_a_reply_for_every_chat() -> None:
    result = await fanout.run(chats=5, llm_latency=0.1)
    assert result["replies"] == 5
    assert result["wall_secs_until_last_reply"] >= result["fastest_reply_secs"] >= 0.1


async def test_memory_search_scenario_times_every_search() -> None:
    result = await memory_search.run(memories=200, rounds=2)
    assert result["searches"] == 16
    assert result["p50_ms"] > 0


async def test_real_sustained_scenario_measures_the_gateway_process_and_its_floors() -> None:
    result = await real_path.sustained(clients=2, seconds=0.5, floor_calls=20)
    assert result["answered_in_all"] >= result["messages"] > 0
    by_thread = result["cpu_ms_per_message_by_thread"]
    assert "event_loop" in by_thread
    assert abs(sum(by_thread.values()) - result["cpu_ms_per_message"]) < 0.01
    assert result["bare_llm_call"]["calls"] == 20
    assert result["bare_websocket"]["messages_per_sec"] > 0
    # a size, not a timing: every built-in tool's schema in one "hello" stays in budget
    assert 0 < result["hello_request_bytes"] <= 8_000
    assert result["hello_tools"] >= 16
    assert result["prefix_byte_stable"] is True


@pytest.mark.postgres
@pytest.mark.slow
async def test_real_sustained_postgres_runs_both_backends_in_one_run() -> None:
    result = await real_postgres.run(clients=2, seconds=0.5)
    for backend in ("sqlite", "postgres"):
        figures = result[backend]
        assert figures["answered_in_all"] >= figures["messages"] > 0, backend
        assert figures["cpu_ms_per_message"] > 0, backend
    assert result["postgres"]["postgres_server_cpu_ms_per_message"] > 0
    ratio = result["postgres"]["cpu_ms_per_message"] / result["sqlite"]["cpu_ms_per_message"]
    assert result["gateway_cpu_ratio"] == round(ratio, 3)
    assert result["meets_target"] == (ratio <= result["target_gateway_cpu_ratio"] == 1.5)
    assert "gateway CPU PostgreSQL ÷ SQLite = " in real_postgres.summary(result)


async def test_real_sustained_postgres_says_it_skipped_without_postgresql(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PICOBOT_TEST_NO_POSTGRES", "1")
    result = await real_postgres.run(clients=2, seconds=0.5)
    assert result["skipped"] == "skipped: PostgreSQL not installed"
    assert "sqlite" not in result
    assert real_postgres.summary(result).endswith("skipped: PostgreSQL not installed")


async def test_real_fanout_scenario_runs_two_bursts_at_both_caps() -> None:
    result = await real_path.fanout(chats=3, llm_latency=0.1)
    assert result["replies"] == 3
    assert result["first_burst_after_start"]["replies"] == 3
    assert result["default_cap"]["replies"] == 3
    assert result["default_cap"]["first_burst_after_start"]["replies"] == 3


async def test_history_scenarios_answer_in_long_chats() -> None:
    scaling = await history.scaling(sizes=(10, 200), turns=2, chats=1)
    assert set(scaling["by_history_messages"]) == {"10", "200"}
    big = await history.big_session(count=2_000, later_turns=2)
    assert big["first_request_estimated_tokens"] <= big["window_tokens"]
    assert big["later_vs_short"] == round(
        big["later_turn_cpu_ms"] / big["short_chat_turn_cpu_ms"], 3
    )


async def test_startup_scenario_reports_help_ready_rss_and_the_first_replies() -> None:
    result = await startup.run(starts=1, load_secs=0.5)
    assert result["help_secs"] > 0
    assert result["start_to_ready_secs"] > 0
    assert result["floor_start_to_ready_secs"] > 0
    own = result["start_to_ready_secs"] - result["floor_start_to_ready_secs"]
    assert abs(result["own_start_secs"] - own) < 0.002
    assert result["idle_rss_mib"] > 0
    assert result["first_reply_secs"] > 0
    assert result["second_reply_secs"] > 0


_GATEWAY_IMPORTS = """
import json, sys
from gateway.cli.program import _import_structlog_without_rich
_import_structlog_without_rich()
import gateway.app
from storage.backends import open_database
open_database("sqlite:///unused.db")  # the default backend, imported when the gateway opens it
print(json.dumps(sorted({name.split(".")[0] for name in sys.modules})))
"""


def test_the_start_up_floor_loads_the_dependencies_the_gateway_loads() -> None:
    """bench.ready_floor stands for the libraries the gateway imports before
    /ready: each of picobot's direct dependencies the gateway loads is in its
    list, and nothing else is."""
    out = subprocess.run(
        [sys.executable, "-c", _GATEWAY_IMPORTS], capture_output=True, text=True, check=True
    )
    loaded = set(json.loads(out.stdout))
    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    wanted = {_dist_key(spec) for spec in project["project"]["dependencies"]}
    by_module = packages_distributions()
    direct = {m for m in loaded if wanted & {_dist_key(d) for d in by_module.get(m, ())}}
    assert direct == {name.split(".")[0] for name in ready_floor.LIBRARIES}


def test_the_start_up_floor_cleans_up_when_the_bench_terminates_it(tmp_path: Path) -> None:
    """bench.startup stops each floor process with SIGTERM: it exits 0 and
    leaves no temporary directory behind."""
    with subprocess.Popen(
        [sys.executable, "-m", "bench.ready_floor"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    ) as proc:
        try:
            assert proc.stdout is not None
            assert int(proc.stdout.readline()) > 0
            assert list(tmp_path.iterdir())  # its database is open
        finally:
            proc.terminate()
    assert proc.returncode == 0
    assert list(tmp_path.iterdir()) == []


async def test_the_bench_llm_reports_usage_by_size_not_by_the_test_fakes_word_count() -> None:
    """bench.fake_llm skips the test fakes' word-by-word count and prompt-cache
    simulation (more than half of its CPU, taken from the gateway on 2
    cores): usage is the body's size at 4 bytes a token, streamed as the
    providers stream it."""
    words = " ".join(["word"] * 300)
    openai_body = {
        "model": "m",
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": words}],
    }
    anthropic_body = {
        "model": "m",
        "stream": True,
        "max_tokens": 64,
        "messages": [{"role": "user", "content": words}],
    }
    async with (
        fake_llm.BenchLLM() as openai_llm,
        fake_llm.BenchAnthropic() as anthropic_llm,
        aiohttp.ClientSession() as http,
    ):
        async with http.post(f"{openai_llm.base_url}/chat/completions", json=openai_body) as r:
            events = [line for line in (await r.text()).splitlines() if line.startswith("data: {")]
        usage = json.loads(events[-1].removeprefix("data: "))["usage"]
        assert usage["prompt_tokens"] == len(orjson.dumps(openai_body)) // 4
        assert usage["prompt_tokens_details"]["cached_tokens"] == 0
        async with http.post(
            f"{anthropic_llm.base_url}/v1/messages",
            json=anthropic_body,
            headers={"anthropic-version": "2023-06-01"},
        ) as r:
            text = await r.text()
        start = next(line for line in text.splitlines() if '"message_start"' in line)
        message = json.loads(start.removeprefix("data: "))["message"]
        assert message["usage"]["input_tokens"] == len(orjson.dumps(anthropic_body)) // 4


def _dist_key(spec: str) -> str:
    """`prometheus-client>=0.20` → `prometheus_client`; `PyYAML` → `pyyaml`."""
    name = re.split(r"[\[<>=!~; ]", spec, maxsplit=1)[0]
    return re.sub(r"[-_.]+", "_", name).lower()


def test_every_figure_is_also_given_per_calibration() -> None:
    result = {
        "cpu_ms_per_message": 2.0,
        "by": {"p50_ms": 4.0},
        "wall_secs_until_last_reply": 1.0,
        "n": 3,
        "messages": 10,
        "llm_latency_secs": 1.0,  # an input, not a figure
        "target_wall_secs": 1.15,
        "default_cap": {"fastest_reply_secs": 0.5},
    }
    assert per_calibration(result, 20.0) == {
        "cpu_ms_per_message": 0.1,
        "by.p50_ms": 0.2,
        "wall_secs_until_last_reply": 50.0,
        "default_cap.fastest_reply_secs": 25.0,
    }


async def test_providers_scenario_measures_each_provider_and_the_floor() -> None:
    result = await providers.run(calls=20, clients=2)
    for kind in ("openai", "anthropic", "bare_llm_call"):
        assert result[kind]["calls"] == 20
        assert result[kind]["cpu_ms_per_call"] > 0


@pytest.mark.parametrize("mode", ["load", "history"])
async def test_paired_runs_two_gateways_and_gives_their_ratio(mode: str) -> None:
    """Under load at once, or turn by turn in a long chat (`--history`)."""
    root = str(Path(__file__).resolve().parents[1])  # this checkout as the "other" too
    if mode == "load":
        result = await paired.run(root, rounds=2, clients=2, seconds=0.5)
        assert result["clients_each"] == 1
    else:
        result = await paired.run_history(root, history=200, rounds=2, turns=2)
        assert result["history_messages"] == 200
    assert len(result["ratios"]) == 2
    assert result["this_cpu_ms_per_message"] > 0
    assert result["other_cpu_ms_per_message"] > 0
    assert result["ratio_median"] == statistics.median(result["ratios"])
