"""`real_sustained_cluster`: the real_sustained workload (bench.real_path: the
`picobot gateway` process on shipped defaults, the fake LLM process, N
clients in a load process) on one durable PostgreSQL (bench.postgres), run
with 1 worker and then with 2 workers on a fresh database each, in one run so
that both see the machine's speed of the same minutes (docs/scale-out.md).

The clients are dealt to the workers in turn (client i on worker i mod W), as
a balancer spreads WebSocket connections; each client's chat is recorded and
answered on the worker it is connected to. Everything runs on this machine:
the workers, the server, the fake LLM and the clients share its cores.

For each worker count: msg/s and latency; the workers' CPU per message (from
/proc, summed over the worker processes, and per worker); the PostgreSQL
server's CPU per message (the postmaster and all its children, from /proc);
and the database's own cost per message from its statistics: transactions
committed, WAL written (bytes, records) and WAL flushes. The idle cost of the
workers (their heartbeats) is measured apart, over a few seconds without load.

Without PostgreSQL binaries the scenario is skipped, not failed.

`python -m bench.cluster load CLIENTS SECONDS URL…` is the load process: the
clients of bench.load, dealt over several gateways' /ws URLs.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import psycopg

from bench.harness import ask, connect, percentiles
from bench.load import client
from bench.postgres import (
    DURABILITY,
    NOT_INSTALLED,
    PostgresCpu,
    PostgresServer,
    find_bindir,
    postgres_server,
)
from bench.process import CpuMeter, GatewayProc, fake_llm, gateway_process, shipped_config

SCENARIO = "real_sustained_cluster"
WORKER_COUNTS = (1, 2)
IDLE_SECS = 10.0
# A backend's statistics reach the shared counters when it goes idle, at most
# once a second, and an idle one's last second waits up to 10 s, or until its
# next transaction: a heartbeat (every lease_secs / 3, 3.3 s by default).
# Read them this long after the load (or the warm-up) stopped.
STATS_SETTLE_SECS = 5.0
# the one transaction of each `db_stats` read, counted in the next read's window
_OWN_COMMITS = 1

_DB_STATS = """
SELECT d.xact_commit, d.xact_rollback, d.tup_inserted, d.tup_updated, d.tup_deleted,
       w.wal_records, w.wal_sync,
       pg_current_wal_lsn() - '0/0'::pg_lsn
FROM pg_stat_database d, pg_stat_wal w
WHERE d.datname = current_database()
"""
_DB_FIELDS = (
    "commits",
    "rollbacks",
    "rows_inserted",
    "rows_updated",
    "rows_deleted",
    "wal_records",
    "wal_flushes",
    "wal_bytes",
)


def db_stats(url: str) -> dict[str, float]:
    """The database's counters now (commits, rows, WAL); cluster-wide for the
    WAL, which only the bench's one database writes."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(_DB_STATS).fetchone()
    assert row is not None
    return {name: float(value) for name, value in zip(_DB_FIELDS, row, strict=True)}


def grown(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Each counter's growth between two reads, less the first read's own commit."""
    growth = {k: after[k] - before[k] for k in _DB_FIELDS}
    growth["commits"] -= _OWN_COMMITS
    return growth


def per_message(before: dict[str, float], after: dict[str, float], n: int) -> dict[str, float]:
    """Each counter's growth per one of `n` messages."""
    per = max(1, n)
    return {f"{k}_per_message": round(v / per, 3) for k, v in grown(before, after).items()}


def worker_config(base_url: str, database: str, index: int, workers: int) -> dict[str, Any]:
    """Shipped defaults on `database`; named workers when there are several (a
    lone worker keeps the config a gateway from before cluster mode accepts:
    BENCH_GATEWAY_CODE can name such a checkout, for the cost of the mode)."""
    config = shipped_config(base_url)
    config["storage"] = {"url": database}
    if workers > 1:
        config["cluster"] = {"worker_name": f"bench-{index + 1}"}
    return config


async def warm(url: str, chat_id: str) -> None:
    """Two turns on one worker, in a chat of its own (the same message ids in
    one chat on another worker would be duplicates, never answered): the LLM
    SDK imported, a connection to the LLM open."""
    ws = await connect(url, chat_id)
    try:
        await ask(ws, "w1", "hello")
        await ask(ws, "w2", "hello again")
    finally:
        await ws.close()


async def run_cluster_load(urls: list[str], clients: int, seconds: float) -> dict[str, Any]:
    """The load process (`python -m bench.cluster load …`); its JSON."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.cluster", "load", str(clients), str(seconds), *urls,
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, _ = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"load generator failed with {proc.returncode}")
    result: dict[str, Any] = json.loads(out)
    return result


async def _idle_cost(server: PostgresServer, database: str, workers: int) -> dict[str, float]:
    """What the workers cost the database while nothing happens: their
    heartbeats (one UPDATE of each worker's row every lease_secs / 3)."""
    cpu = PostgresCpu(server.postmaster_pid())
    before = await asyncio.to_thread(db_stats, database)
    cpu.start()
    t0 = time.perf_counter()
    await asyncio.sleep(IDLE_SECS)
    server_ms = cpu.stop(1)
    secs = time.perf_counter() - t0
    growth = grown(before, await asyncio.to_thread(db_stats, database))
    return {
        "workers": workers,
        "seconds": round(secs, 2),
        "commits_per_sec": round(growth["commits"] / secs, 2),
        "wal_bytes_per_sec": round(growth["wal_bytes"] / secs, 1),
        "postgres_cpu_ms_per_sec": round(server_ms / secs, 3),
    }


async def _workers_run(
    base_url: str, server: PostgresServer, workers: int, clients: int, seconds: float
) -> dict[str, Any]:
    """`workers` gateway processes on a fresh database, the load over all of them."""
    database = server.new_database()
    async with AsyncExitStack() as stack:
        procs: list[GatewayProc] = []
        for i in range(workers):  # one after the other: the first one migrates
            config = worker_config(base_url, database, i, workers)
            procs.append(await stack.enter_async_context(gateway_process(config)))
        for i, gw in enumerate(procs):
            await warm(gw.ws_url, f"warm-{i}")
        await asyncio.sleep(STATS_SETTLE_SECS)  # the warm-up's statistics counted before
        idle = await _idle_cost(server, database, workers)
        meters = [CpuMeter(gw.pid) for gw in procs]
        pg = PostgresCpu(server.postmaster_pid())
        before = await asyncio.to_thread(db_stats, database)
        for meter in meters:
            meter.start()
        pg.start()
        load = await run_cluster_load([gw.ws_url for gw in procs], clients, seconds)
        answered = load["answered_in_all"]
        cpus = [meter.stop(answered) for meter in meters]
        server_ms = pg.stop(answered)
        await asyncio.sleep(STATS_SETTLE_SECS)
        after = await asyncio.to_thread(db_stats, database)
    workers_ms = round(sum(c["cpu_ms_per_message"] for c in cpus), 3)
    return {
        "workers": workers,
        "messages_per_sec": round(load["messages"] / load["seconds"], 1),
        **load,
        "workers_cpu_ms_per_message": workers_ms,
        "per_worker": [
            {"answered": n, **cpu} for n, cpu in zip(load["answered_by_url"], cpus, strict=True)
        ],
        "postgres_cpu_ms_per_message": server_ms,
        "total_cpu_ms_per_message": round(workers_ms + server_ms, 3),
        "database": per_message(before, after, answered),
        "idle": idle,
    }


async def run(
    clients: int = 8, seconds: float = 10.0, workers: tuple[int, ...] = WORKER_COUNTS
) -> dict[str, Any]:
    head: dict[str, Any] = {
        "scenario": SCENARIO,
        "path": "picobot gateway processes (workers), shipped defaults, OpenAI SDK → fake "
        "LLM process (HTTP); one PostgreSQL server; all on this machine (127.0.0.1)",
        "clients": clients,
        "seconds": seconds,
        "durability": DURABILITY,
    }
    bindir = find_bindir()
    if bindir is None:
        return {**head, "skipped": NOT_INSTALLED}
    runs: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="picobot-bench-") as tmp:
        async with fake_llm(0.0, Path(tmp), record=0) as llm:
            with postgres_server(bindir) as server:
                for count in workers:
                    runs[str(count)] = await _workers_run(
                        llm.base_url, server, count, clients, seconds
                    )
    result = {**head, "by_workers": runs}
    if "1" in runs and len(runs) > 1:
        one = runs["1"]
        result["vs_one_worker"] = {
            n: {
                "messages_per_sec": round(r["messages_per_sec"] / one["messages_per_sec"], 3),
                "workers_cpu_per_message": round(
                    r["workers_cpu_ms_per_message"] / one["workers_cpu_ms_per_message"], 3
                ),
                "postgres_cpu_per_message": round(
                    r["postgres_cpu_ms_per_message"]
                    / max(one["postgres_cpu_ms_per_message"], 1e-9),
                    3,
                ),
            }
            for n, r in runs.items()
            if n != "1"
        }
    return result


def summary(result: dict[str, Any]) -> str:
    """One line per worker count, for the console; ÷cal when the result has
    its calibration (`per_calibration`)."""
    if "skipped" in result:
        return f"{SCENARIO}: {result['skipped']}"
    cal = result.get("per_calibration", {})
    calibration = result.get("machine", {}).get("calibration_ms")
    lines = [
        f"{SCENARIO} ({result['clients']} clients, {result['seconds']} s, "
        f"calibration {calibration} ms; {result['durability']}):"
    ]
    for n, r in result["by_workers"].items():
        db = r["database"]
        per_cal = cal.get(f"by_workers.{n}.workers_cpu_ms_per_message")
        lines.append(
            f"  {n} worker(s): {r['messages_per_sec']:>7} msg/s  p50 {r['p50_ms']} ms  "
            f"workers CPU {r['workers_cpu_ms_per_message']} ms/msg (÷cal {per_cal})  "
            f"PostgreSQL CPU {r['postgres_cpu_ms_per_message']} ms/msg  "
            f"commits {db['commits_per_message']}/msg  WAL {db['wal_bytes_per_message']:.0f} B/msg "
            f"in {db['wal_flushes_per_message']} flushes/msg  "
            f"idle {r['idle']['commits_per_sec']} commits/s"
        )
    return "\n".join(lines)


# --- the load process ----------------------------------------------------------------


async def load_main(clients: int, seconds: float, urls: list[str]) -> dict[str, Any]:
    """bench.load's closed loop, client i on urls[i mod len(urls)]."""
    start = time.perf_counter()
    warmup_until = start + min(1.0, seconds / 5)
    until = warmup_until + seconds
    samples: list[list[float]] = [[] for _ in urls]
    sent = [[0] for _ in urls]
    await asyncio.gather(
        *(
            client(urls[i % len(urls)], i, until, warmup_until, samples[i % len(urls)],
                   sent[i % len(urls)])
            for i in range(clients)
        )
    )  # fmt: skip
    everything = [s for part in samples for s in part]
    return {
        "messages": len(everything),
        "seconds": seconds,
        "answered_in_all": sum(s[0] for s in sent),
        "answered_by_url": [s[0] for s in sent],
        **percentiles(everything),
    }


if __name__ == "__main__":
    if len(sys.argv) < 5 or sys.argv[1] != "load":
        raise SystemExit("usage: python -m bench.cluster load CLIENTS SECONDS URL...")
    outcome = asyncio.run(load_main(int(sys.argv[2]), float(sys.argv[3]), sys.argv[4:]))
    print(json.dumps(outcome))
