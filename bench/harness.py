"""Shared pieces: a throwaway gateway in-process, an instant provider, WS clients."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import platform
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import structlog
import websockets

from agent.providers.base import DeltaSink, LLMProvider, LLMRequest, LLMResponse
from gateway.app import Gateway
from gateway.config.loading import LoadedConfig, parse_config


class InstantProvider:
    """Answers at once, in-process: isolates the gateway's own cost."""

    name = "instant"

    async def complete(self, request: LLMRequest, on_delta: DeltaSink | None = None) -> LLMResponse:
        return LLMResponse(content="ok")

    async def aclose(self) -> None:
        return None


def quiet_logs() -> None:
    logging.basicConfig(level=logging.WARNING)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def loaded_config(home: Path, base_url: str, **gateway: Any) -> LoadedConfig:
    raw = {
        "providers": {"default": {"base_url": base_url, "api_key": "bench", "max_retries": 0}},
        "models": {"default": {"model_id": "bench-model"}},
        "agents": {"default": {"compaction": {"enabled": False}}},
        "gateway": {"host": "127.0.0.1", "port": 0, "agent_prompt_reinject_every": 0, **gateway},
        "logging": {"level": "warning"},
    }
    config, missing = parse_config(raw, {}, source="bench")
    return LoadedConfig(config, None, home, missing)


@asynccontextmanager
async def gateway(
    base_url: str, providers: dict[str, LLMProvider] | None = None, **gateway_cfg: Any
) -> AsyncIterator[Gateway]:
    with tempfile.TemporaryDirectory(prefix="picobot-bench-") as tmp:
        gw = Gateway(loaded_config(Path(tmp), base_url, **gateway_cfg), providers=providers)
        task = asyncio.create_task(gw.run(), name="bench-gateway")
        await asyncio.wait_for(gw.started.wait(), 30)
        try:
            yield gw
        finally:
            gw.request_stop()
            await asyncio.wait_for(task, 60)


async def connect(url: str, chat_id: str) -> websockets.ClientConnection:
    ws = await websockets.connect(url, max_queue=None, compression=None)
    sock = ws.transport.get_extra_info("socket")
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    await ws.send(json.dumps({"type": "hello", "chat_id": chat_id}))
    welcome = json.loads(await ws.recv())
    assert welcome["type"] == "welcome", welcome
    return ws


async def ask(ws: websockets.ClientConnection, msg_id: str, text: str) -> float:
    """Send one message; seconds until its reply frame arrived."""
    t0 = time.perf_counter()
    await ws.send(json.dumps({"type": "message", "id": msg_id, "text": text}))
    while True:
        frame = json.loads(await ws.recv())
        if frame["type"] == "message" and frame.get("reply_to") == msg_id:
            return time.perf_counter() - t0


async def run_load(url: str, *args: object) -> dict[str, Any]:
    """Run the load generator (`bench.load URL ...`) in its own process; its JSON."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.load", url, *map(str, args), stdout=asyncio.subprocess.PIPE
    )
    out, _ = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"load generator failed with {proc.returncode}")
    result: dict[str, Any] = json.loads(out)
    return result


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    q = statistics.quantiles(ordered, n=100, method="inclusive")
    return {
        "p50_ms": round(q[49] * 1000, 3),
        "p90_ms": round(q[89] * 1000, 3),
        "p95_ms": round(q[94] * 1000, 3),
        "p99_ms": round(q[98] * 1000, 3),
        "max_ms": round(ordered[-1] * 1000, 3),
    }


def machine() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "calibration_ms": calibration_ms(),
    }


def calibration_ms() -> float:
    """A fixed pure-Python workload (best of 5), to compare machines: figures
    scale roughly with it."""
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        total = 0
        for i in range(1_000_000):
            total += i % 7
        best = min(best, time.perf_counter() - t0)
    return round(best * 1000, 1)
