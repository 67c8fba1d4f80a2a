"""`real_sustained_postgres`: the real_sustained workload (bench.real_path:
one `picobot gateway` process on shipped defaults, the fake LLM process, N
clients in a third process) run twice in the same run, on the default SQLite
file and then on a fresh database of a throwaway PostgreSQL server on the
same machine (bench.postgres), so that both see the machine's speed of the
same minutes.

For each backend: msg/s, latency, the gateway process's CPU per message (by
thread: the storage thread is `other_threads`), and for PostgreSQL the
server's own CPU per message as a separate figure. The target (issue 53)
concerns the gateway's CPU only: PostgreSQL's ≤ 1.5 × SQLite's.

Durability differs, and the result says so: the PostgreSQL server keeps its
defaults (fsync and synchronous_commit on, every commit waits for its WAL
flush); SQLite runs as the gateway ships it (WAL, synchronous=NORMAL: a
commit is not flushed until a checkpoint).

Without PostgreSQL binaries the scenario is skipped, not failed: its result
says "skipped: PostgreSQL not installed".
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from bench.harness import run_load
from bench.postgres import (
    DURABILITY,
    NOT_INSTALLED,
    PostgresCpu,
    PostgresServer,
    find_bindir,
    postgres_server,
)
from bench.process import CpuMeter, fake_llm, gateway_process, shipped_config
from bench.real_path import two_turns

SCENARIO = "real_sustained_postgres"
TARGET_RATIO = 1.5  # gateway CPU per message, PostgreSQL ÷ SQLite (issue 53)
SQLITE_DURABILITY = "WAL, synchronous=NORMAL (as shipped: a commit is flushed at checkpoints)"


async def _one_backend(
    base_url: str, clients: int, seconds: float, server: PostgresServer | None
) -> dict[str, Any]:
    """The real_sustained load on one gateway: on `server` (a fresh database) if
    given, else on the default SQLite file."""
    config = shipped_config(base_url)
    if server is not None:
        config["storage"] = {"url": server.new_database()}
    async with gateway_process(config) as gw:
        await two_turns(gw.ws_url)  # warm: the LLM SDK imported, connections open
        meter = CpuMeter(gw.pid)
        pg = PostgresCpu(server.postmaster_pid()) if server is not None else None
        meter.start()
        if pg is not None:
            pg.start()
        load = await run_load(gw.ws_url, clients, seconds)
        answered = load["answered_in_all"]
        cpu = meter.stop(answered)
        server_ms = pg.stop(answered) if pg is not None else None
    result = {"messages_per_sec": round(load["messages"] / load["seconds"], 1), **load, **cpu}
    if server_ms is not None:
        result["postgres_server_cpu_ms_per_message"] = server_ms
    return result


async def run(clients: int = 8, seconds: float = 10.0) -> dict[str, Any]:
    head: dict[str, Any] = {
        "scenario": SCENARIO,
        "path": "picobot gateway process, shipped defaults, OpenAI SDK → fake LLM process "
        "(HTTP); storage on SQLite, then on PostgreSQL (same machine, 127.0.0.1)",
        "clients": clients,
        "seconds": seconds,
    }
    bindir = find_bindir()
    if bindir is None:
        return {**head, "skipped": NOT_INSTALLED}
    with tempfile.TemporaryDirectory(prefix="picobot-bench-") as tmp:
        async with fake_llm(0.0, Path(tmp), record=0) as llm:
            sqlite = await _one_backend(llm.base_url, clients, seconds, None)
            with postgres_server(bindir) as server:
                postgres = await _one_backend(llm.base_url, clients, seconds, server)
    ratio = postgres["cpu_ms_per_message"] / max(sqlite["cpu_ms_per_message"], 1e-9)
    return {
        **head,
        "sqlite": {"durability": SQLITE_DURABILITY, **sqlite},
        "postgres": {"durability": DURABILITY, **postgres},
        "gateway_cpu_ratio": round(ratio, 3),
        "target_gateway_cpu_ratio": TARGET_RATIO,
        "meets_target": ratio <= TARGET_RATIO,
    }


def summary(result: dict[str, Any]) -> str:
    """One line per backend and the ratio, for the console; ÷cal when the
    result has its calibration (`per_calibration`)."""
    if "skipped" in result:
        return f"{SCENARIO}: {result['skipped']}"
    cal = result.get("per_calibration", {})
    calibration = result.get("machine", {}).get("calibration_ms")
    lines = [
        f"{SCENARIO} ({result['clients']} clients, {result['seconds']} s, "
        f"calibration {calibration} ms):"
    ]
    for backend in ("sqlite", "postgres"):
        r = result[backend]
        per_cal = cal.get(f"{backend}.cpu_ms_per_message")
        line = (
            f"  {backend:8} {r['messages_per_sec']:>8} msg/s  gateway CPU "
            f"{r['cpu_ms_per_message']} ms/msg (÷cal {per_cal})  "
            f"p50 {r['p50_ms']} ms  p95 {r['p95_ms']} ms"
        )
        if "postgres_server_cpu_ms_per_message" in r:
            line += f"  server CPU {r['postgres_server_cpu_ms_per_message']} ms/msg"
        lines.append(f"{line}  [{r['durability']}]")
    verdict = "meets" if result["meets_target"] else "MISSES"
    lines.append(
        f"  gateway CPU PostgreSQL ÷ SQLite = {result['gateway_cpu_ratio']} "
        f"({verdict} the target ≤ {result['target_gateway_cpu_ratio']})"
    )
    return "\n".join(lines)
