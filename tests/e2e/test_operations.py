"""Operations through the running gateway: /ready, /metrics, log lines, secrets."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from gateway.app import Gateway
from gateway.lifecycle import StartupError
from storage.sqlite.db import Database, StorageClosed
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.recording_channel import RecordingChannel
from tests.support import (
    PICOBOT,
    child_env,
    make_config,
    running_gateway,
    spawn_gateway,
    ws_client,
)


async def _get(gw: Gateway, path: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as http, http.get(f"{gw.base_url}{path}") as resp:
        return resp.status, await resp.text()


async def test_ready_reports_an_unready_channel_and_recovers(home: Path, llm: FakeOpenAI) -> None:
    channel = RecordingChannel("flaky")
    async with running_gateway(make_config(home, llm.base_url), extra_channels=[channel]) as gw:
        assert (await _get(gw, "/ready"))[0] == 200
        channel.not_ready_reason = "connection lost: reconnecting in 4 s"
        status, body = await _get(gw, "/ready")
        assert status == 503
        assert json.loads(body) == {
            "status": "not_ready",
            "reasons": ["channel flaky: connection lost: reconnecting in 4 s"],
        }
        assert (await _get(gw, "/health"))[0] == 200  # alive, just not ready
        channel.not_ready_reason = None
        assert (await _get(gw, "/ready"))[0] == 200


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


async def test_metrics_after_two_turns(home: Path, llm: FakeOpenAI) -> None:
    llm.add_text("one", usage=(10, 3))
    llm.add_text("two", usage=(20, 4))
    async with running_gateway(make_config(home, llm.base_url)) as gw:
        async with ws_client(gw) as client:
            await client.ask("first")
            await client.ask("second")
        assert gw.dispatcher is not None
        await gw.dispatcher.flush(5)
        status, text = await _get(gw, "/metrics")
    assert status == 200
    m = _samples(text)
    ws = (("channel", "websocket"),)
    assert m[("picobot_inbound_messages_total", ws)] == 2
    assert m[("picobot_outbound_sent_total", ws)] == 2
    assert m[("picobot_turn_duration_seconds_count", ws)] == 2
    llm_labels = (("model", "fake-model"), ("provider", "default"))
    assert m[("picobot_llm_request_duration_seconds_count", llm_labels)] == 2
    assert m[("picobot_llm_tokens_total", (("direction", "input"), ("model", "fake-model")))] == 30
    assert m[("picobot_llm_tokens_total", (("direction", "output"), ("model", "fake-model")))] == 7
    assert m[("picobot_outbox_rows", (("state", "pending"),))] == 0
    assert m[("picobot_channel_ready", ws)] == 1


async def test_logs_are_json_with_one_run_id_per_turn_and_no_secrets(
    home: Path, llm: FakeOpenAI
) -> None:
    secret_key = "sk-test-Zq8vN3xR7uTOPSECRET"
    auth = "tok-Gh5Jk2Lm9Np4QqWs"
    llm.api_key = secret_key
    llm.add_tool_call("calculator", {"expression": "2+2"})
    llm.add_text("4")
    config: dict[str, Any] = {
        "providers": {"default": {"base_url": llm.base_url, "api_key": "${MY_LLM_KEY}"}},
        "models": {"default": {"model_id": "fake-model"}},
        "gateway": {"port": 0, "auth_token": auth},
        "logging": {"format": "json", "level": "debug"},
    }
    gw = await spawn_gateway(config, home, child_env(home, MY_LLM_KEY=secret_key))
    try:
        import websockets

        async with websockets.connect(gw.ws_url) as ws:
            await ws.send(json.dumps({"type": "hello", "chat_id": "ops", "token": auth}))
            await ws.recv()
            await ws.send(json.dumps({"type": "message", "id": "q1", "text": "what is 2+2?"}))
            while json.loads(await ws.recv())["type"] != "message":
                pass
    finally:
        assert await gw.stop() == 0
    raw = "\n".join(json.dumps(line) for line in gw.lines)
    assert secret_key not in raw
    assert auth not in raw
    assert not gw.events("raw")  # every line parsed as JSON
    done = gw.events("turn_done")
    assert len(done) == 1
    run_id = done[0]["run_id"]
    turn_lines = [line for line in gw.lines if line.get("run_id")]
    assert {line["run_id"] for line in turn_lines} == {run_id}
    assert all(
        line.get("session_id") == "ops" and line.get("channel") == "websocket"
        for line in turn_lines
    )


async def test_backup_during_a_running_turn_is_consistent(
    home: Path, llm: FakeOpenAI, tmp_path: Path
) -> None:
    import asyncio
    import sqlite3

    from gateway.cli import main as picobot_main

    loaded = make_config(home, llm.base_url)
    config_file = tmp_path / "backup-config.json"
    config_file.write_text(json.dumps({"storage": {"path": str(loaded.storage_path)}}))
    target = tmp_path / "copy.db"
    async with running_gateway(loaded) as gw, ws_client(gw) as client:
        await client.ask("first turn")
        llm.hold()
        await client.send("second turn, held at the model")
        await llm.wait_requests(2)  # a turn is running
        code = await asyncio.to_thread(
            picobot_main, ["backup", str(target), "--config", str(config_file)]
        )
        assert code == 0
        assert gw.db is not None
        live = await gw.db.read(
            lambda c: (
                c.execute("SELECT COUNT(*) FROM sessions").fetchone()[0],
                c.execute("SELECT COUNT(*) FROM messages").fetchone()[0],
            )
        )
        llm.release()
        await client.recv_type("message")
    copy = sqlite3.connect(target)
    try:
        assert copy.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        counted = (
            copy.execute("SELECT COUNT(*) FROM sessions").fetchone()[0],
            copy.execute("SELECT COUNT(*) FROM messages").fetchone()[0],
        )
    finally:
        copy.close()
    assert counted == live
    # AGENT.md, the first question and answer; the running turn opened from the
    # cached history, so its question is stored together with its answer
    assert counted[1] == 3


class _BrokenChannel(RecordingChannel):
    async def start(self) -> None:
        raise RuntimeError("platform rejected the credentials")


class _StartStopChannel(RecordingChannel):
    """Records the order in which the gateway starts and stops it."""

    def __init__(self, name: str, log: list[str]) -> None:
        super().__init__(name)
        self.log = log

    async def start(self) -> None:
        self.log.append(f"start {self.name}")
        await super().start()

    async def stop(self) -> None:
        self.log.append(f"stop {self.name}")
        await super().stop()


async def test_a_channel_failing_to_start_stops_what_started_and_fails_start_up(
    home: Path, llm: FakeOpenAI
) -> None:
    order: list[str] = []
    first = _StartStopChannel("first", order)
    gw = Gateway(make_config(home, llm.base_url), extra_channels=[first, _BrokenChannel("broken")])
    with pytest.raises(StartupError, match="channel broken failed to start: RuntimeError"):
        await asyncio.wait_for(gw.run(), 20)
    assert order == ["start first", "stop first"]
    assert not gw.started.is_set()
    assert gw.db is not None
    with pytest.raises(StorageClosed):  # storage was closed on the way out
        await gw.db.read(lambda c: c.execute("SELECT 1").fetchone())


async def test_recovery_that_raises_fails_start_up_with_a_named_reason(
    home: Path, llm: FakeOpenAI
) -> None:
    """`picobot gateway` exits non-zero and says which part failed (the parts
    that had started are stopped: see the test above)."""
    config = {
        "providers": {"default": {"base_url": llm.base_url, "api_key": "test-key"}},
        "models": {"default": {"model_id": "fake-model"}},
        "gateway": {"port": 0},
    }
    db_path = home / "storage" / "sessions.db"
    async with Database(db_path) as db:  # an inbox recovery cannot read (a row that
        # cannot be parsed is only a dead letter: tests/e2e/test_access.py)
        await db.write(lambda c: c.execute("ALTER TABLE inbox RENAME COLUMN payload TO gone"))
    path = home / "config.json"
    path.write_text(json.dumps(config))
    proc = await asyncio.create_subprocess_exec(
        PICOBOT,
        "gateway",
        "--config",
        str(path),
        env=child_env(home),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 1
    lines = err.decode().splitlines()  # JSON log lines, then the CLI's own message
    assert lines[-1].startswith("picobot: cannot start: inbound failed to start: OperationalError")
    events = [json.loads(line)["event"] for line in lines if line.startswith("{")]
    assert "service_start_failed" in events
    assert "gateway_started" not in events


async def test_a_provider_sdk_is_imported_at_its_first_call_and_an_unused_one_never(
    home: Path, llm: FakeOpenAI
) -> None:
    """An SDK is imported by its provider's first call: the turn's provider
    loads, and a provider no model uses is never imported in the gateway's
    whole life (a warm-up at start imported every configured one)."""
    llm.add_text("hi")
    config: dict[str, Any] = {
        "providers": {
            "default": {"base_url": llm.base_url, "api_key": "k"},
            "spare": {"type": "anthropic", "base_url": llm.base_url, "api_key": "k"},
        },
        "models": {"default": {"model_id": "fake-model"}},
        "gateway": {"port": 0},
        "logging": {"format": "json"},
    }
    gw = await spawn_gateway(config, home, child_env(home))
    try:
        import websockets

        async with websockets.connect(gw.ws_url) as ws:
            await ws.send(json.dumps({"type": "hello", "chat_id": "lazy"}))
            await ws.recv()
            await ws.send(json.dumps({"type": "message", "id": "q1", "text": "hello"}))
            while (frame := json.loads(await ws.recv()))["type"] != "message":
                pass
        assert frame["text"] == "hi"
        assert [e["provider"] for e in gw.events("provider_loaded")] == ["default"]
    finally:
        assert await gw.stop() == 0
    assert [e["provider"] for e in gw.events("provider_loaded")] == ["default"]
