"""The headline scenarios, on the path users run: the `picobot gateway`
process on shipped defaults, the real OpenAI provider and SDK, the fake LLM
in its own process over HTTP, the clients in a third (bench.process).

- `sustained`: N clients in a loop. Besides msg/s and latency it records the
  gateway's CPU per message split by thread, and in the same run the bare
  WebSocket ceiling (bench.ceiling) and the bare LLM-call floor (bench.floor:
  the gateway's own "hello" request replayed with plain aiohttp), so that
  `vs_floor` = gateway CPU ÷ (floor + bare WebSocket) compares across runs;
  also the "hello" request's size with every built-in tool, whether its
  prefix (tools and system messages before the history) is byte-stable
  between two turns, and the RSS after the load.
- `fanout`: N chats × 1 message at once, the LLM taking a fixed latency,
  with `max_concurrent_runs` N and at its default. Two bursts of new chats
  on each gateway: the first after start (it also imports the LLM SDK, at
  the provider's first call, and opens the connections to the LLM), then the
  headline one, on a gateway that has answered once.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from bench import ceiling, floor
from bench.harness import ask, connect, run_load
from bench.process import CpuMeter, fake_llm, gateway_process, rss_mib, shipped_config

DEFAULT_MAX_CONCURRENT_RUNS = 32


def _prefix(body: dict[str, Any]) -> str:
    """What the provider may cache: the tools and the messages before the first user one."""
    messages = body["messages"]
    first_user = next(i for i, m in enumerate(messages) if m["role"] == "user")
    return json.dumps([body.get("tools"), messages[:first_user]], sort_keys=True)


async def two_turns(url: str) -> None:
    """Two turns in one chat: the gateway warmed (the LLM SDK imported, a
    connection to the LLM open), the fake LLM's first two requests recorded."""
    ws = await connect(url, "prefix-check")
    try:
        await ask(ws, "p1", "hello")
        await ask(ws, "p2", "hello again")
    finally:
        await ws.close()


async def sustained(
    clients: int = 8, seconds: float = 10.0, floor_calls: int = 2_000
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="picobot-bench-") as tmp:
        async with fake_llm(0.0, Path(tmp), record=2) as llm:
            async with gateway_process(shipped_config(llm.base_url)) as gw:
                await two_turns(gw.ws_url)
                meter = CpuMeter(gw.pid)
                meter.start()
                load = await run_load(gw.ws_url, clients, seconds)
                cpu = meter.stop(load["answered_in_all"])
                rss_after = rss_mib(gw.pid)
            (hello, again) = (r["body"] for r in llm.recorded()[:2])
            wire = llm.recorded()[0]["wire_bytes"]
            bare_llm = await floor.run(llm.base_url, hello, clients, floor_calls)
    bare_ws = await ceiling.run(clients, min(seconds, 3.0))
    calls = bare_llm["cpu_ms_per_call"]
    base = calls + bare_ws["server_cpu_ms_per_message"]
    return {
        "scenario": "real_sustained",
        "path": "picobot gateway process, shipped defaults, OpenAI SDK → fake LLM process (HTTP)",
        "clients": clients,
        "messages_per_sec": round(load["messages"] / load["seconds"], 1),
        **load,
        **cpu,
        "bare_websocket": bare_ws,
        "bare_llm_call": bare_llm,
        "vs_floor": round(cpu["cpu_ms_per_message"] / base, 2) if base else None,
        "hello_request_bytes": wire,
        "hello_tools": len(hello.get("tools", ())),
        "prefix_byte_stable": _prefix(hello) == _prefix(again),
        "rss_after_load_mib": rss_after,
        "targets": {"cpu_per_message_per_calibration": 0.035, "vs_floor": 4.0},
    }


async def fanout(chats: int = 100, llm_latency: float = 1.0) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="picobot-bench-") as tmp:
        async with fake_llm(llm_latency, Path(tmp), record=0) as llm:
            runs = {}
            for cap in (chats, DEFAULT_MAX_CONCURRENT_RUNS):
                config = shipped_config(llm.base_url, max_concurrent_runs=cap)
                async with gateway_process(config) as gw:
                    first = await run_load(gw.ws_url, chats, "fanout")
                    runs[cap] = {
                        **await run_load(gw.ws_url, chats, "fanout"),
                        "first_burst_after_start": first,
                    }
    return {
        "scenario": "real_fanout",
        "path": "picobot gateway process, shipped defaults, OpenAI SDK → fake LLM process (HTTP)",
        "chats": chats,
        "llm_latency_secs": llm_latency,
        "max_concurrent_runs": chats,
        **runs[chats],
        "default_cap": {
            "max_concurrent_runs": DEFAULT_MAX_CONCURRENT_RUNS,
            **runs[DEFAULT_MAX_CONCURRENT_RUNS],
        },
        "target_wall_secs": llm_latency + 0.15,
    }
