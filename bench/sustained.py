"""Scenario (b): sustained load over WebSocket against an instant in-process
provider, so the figures are the gateway's own cost: every message is durably
recorded in the inbox, its turn persisted, its reply an outbox row before it
is sent. The load generator is a separate process (the machine has 2 cores).
`gateway_cpu_ms_per_message` is the gateway process's CPU time (event loop and
storage thread) per answered message: less dependent on the load than msg/s."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from bench.harness import InstantProvider, gateway


async def run(clients: int = 8, seconds: float = 10.0) -> dict[str, Any]:
    async with gateway("http://127.0.0.1:9/v1", providers={"default": InstantProvider()}) as gw:
        url = f"ws://127.0.0.1:{gw.port}/ws"
        cpu_before = time.process_time()  # this process is the gateway (all its threads)
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bench.load",
            url,
            str(clients),
            str(seconds),
            stdout=asyncio.subprocess.PIPE,
        )
        out, _ = await proc.communicate()
        cpu = time.process_time() - cpu_before
        if proc.returncode != 0:
            raise RuntimeError(f"load generator failed with {proc.returncode}")
        load = json.loads(out)
    return {
        "scenario": "sustained",
        "clients": clients,
        "messages_per_sec": round(load["messages"] / load["seconds"], 1),
        **load,
        "gateway_cpu_ms_per_message": round(cpu * 1000 / max(1, load["answered_in_all"]), 3),
        "targets": {"messages_per_sec": 2000, "p50_ms": 3.0},
    }
