"""Scenario (b): sustained load over WebSocket against an instant in-process
provider, so the figures are the gateway's own cost: every message is durably
recorded in the inbox, its turn persisted, its reply an outbox row before it
is sent. The load generator is a separate process (the machine has 2 cores).

`gateway_cpu_ms_per_message` is the gateway process's CPU time per answered
message, less dependent on the load than msg/s; it splits into the event loop
thread (`event_loop_cpu_ms_per_message`, this thread: the bench runs the
gateway on its own loop) and the other threads, nearly all of it the storage
thread. `bare_websocket` is the machine's ceiling (bench/ceiling.py) at the
same number of clients."""

from __future__ import annotations

import time
from typing import Any

from bench import ceiling
from bench.harness import InstantProvider, gateway, run_load

CEILING_SECS = 3.0


async def run(
    clients: int = 8, seconds: float = 10.0, ceiling_secs: float = CEILING_SECS
) -> dict[str, Any]:
    async with gateway("http://127.0.0.1:9/v1", providers={"default": InstantProvider()}) as gw:
        url = f"ws://127.0.0.1:{gw.port}/ws"
        cpu_before, loop_before = time.process_time(), time.thread_time()
        load = await run_load(url, clients, seconds)
        cpu, loop_cpu = time.process_time() - cpu_before, time.thread_time() - loop_before
    answered = max(1, load["answered_in_all"])
    return {
        "scenario": "sustained",
        "clients": clients,
        "messages_per_sec": round(load["messages"] / load["seconds"], 1),
        **load,
        "gateway_cpu_ms_per_message": round(cpu * 1000 / answered, 3),
        "event_loop_cpu_ms_per_message": round(loop_cpu * 1000 / answered, 3),
        "other_threads_cpu_ms_per_message": round((cpu - loop_cpu) * 1000 / answered, 3),
        "bare_websocket": await ceiling.run(clients, ceiling_secs),
        "targets": {"messages_per_sec": 2000, "p50_ms": 3.0},
    }
