"""Start-up and memory: `picobot --help`, start → /ready, idle RSS, the
first reply.

Start → /ready is given beside its floor (bench.ready_floor: the same
interpreter loading the gateway's libraries and answering /ready, with none
of picobot's code), measured the same way in the same minutes; `own_start_secs`
is the difference, what picobot's own modules and start-up add.

The gateway runs as a real process on shipped defaults with only the
WebSocket channel (bench.process); RSS is read from /proc after it has been
ready and idle for a second, and again after a short load (bench.load).
The first reply after a start includes the import of the LLM SDK (at the
provider's first call); the second one shows a reply without it.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.harness import ask, connect, run_load
from bench.process import fake_llm, gateway_process, rss_mib, shipped_config, until_ready


async def _help_secs() -> float:
    t0 = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway.cli", "--help", stdout=asyncio.subprocess.DEVNULL
    )
    await proc.wait()
    return time.perf_counter() - t0


async def _floor_secs() -> float:
    """Spawn → /ready answered 200, for bench.ready_floor."""
    t0 = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.ready_floor", stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None
    try:
        port = int(await asyncio.wait_for(proc.stdout.readline(), 60))
        await until_ready(port)
        return time.perf_counter() - t0
    finally:
        proc.terminate()
        await proc.wait()


async def run(starts: int = 3, load_secs: float = 3.0) -> dict[str, Any]:
    helps = [await _help_secs() for _ in range(5)]
    floors: list[float] = []
    ready: list[float] = []
    idle: list[float] = []
    first: list[float] = []
    second: list[float] = []
    after = 0.0
    with tempfile.TemporaryDirectory(prefix="picobot-bench-") as tmp:
        async with fake_llm(0.0, Path(tmp), record=0) as llm:
            for n in range(starts):
                floors.append(await _floor_secs())
                async with gateway_process(shipped_config(llm.base_url)) as gw:
                    ready.append(gw.started_secs)
                    await asyncio.sleep(1.0)
                    idle.append(rss_mib(gw.pid))
                    ws = await connect(gw.ws_url, f"first-{n}")
                    try:
                        first.append(await ask(ws, "m1", "hello"))
                        second.append(await ask(ws, "m2", "hello again"))
                    finally:
                        await ws.close()
                    if n == starts - 1:
                        await run_load(gw.ws_url, 4, load_secs)
                        after = rss_mib(gw.pid)
    return {
        "scenario": "startup",
        "path": "picobot gateway process, shipped defaults, WebSocket channel only",
        "help_secs": round(statistics.median(helps), 3),
        "start_to_ready_secs": round(statistics.median(ready), 3),
        "floor_start_to_ready_secs": round(statistics.median(floors), 3),
        "own_start_secs": round(statistics.median(ready) - statistics.median(floors), 3),
        "idle_rss_mib": statistics.median(idle),
        "first_reply_secs": round(statistics.median(first), 3),
        "second_reply_secs": round(statistics.median(second), 3),
        "rss_after_load_mib": after,
        "targets": {"help_secs": 0.2, "start_to_ready_secs": 0.5, "idle_rss_mib": 70},
    }
