"""`python -m bench.paired OTHER_CHECKOUT`: this checkout's gateway against
another's, both under the same load at the same time, CPU per message.

The machine's speed drifts by more than a small change saves: rounds run one
after the other gave the same code 1.00-1.10 ms per message within minutes,
and sequential A/B rounds 5-12 % apart at random. Two gateways (the real path
of bench.real_path, one fake LLM process) loaded at once see the same drift,
so each round's ratio of their CPU per message varies by about 1 %; the
median of the rounds' ratios is the figure. Each gateway gets its own clients,
half the total, so the two together load the machine as one does in
`real_sustained` at the total.

With `--history N` the two gateways answer turns in a chat of N short
messages instead, one turn at a time, taking turns round by round (the cost
of a turn in a long chat; the same code on both read 0.98–1.04 at
N = 8,000, over three runs).

Prints one JSON object: each round's ratio (other ÷ this), their median and
spread, and each side's median CPU ms per message. Not a `make bench`
scenario: it needs the other checkout (e.g. `git worktree add ../base HEAD~1`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import websockets

from bench.harness import ask, connect, run_load
from bench.history import SETTLE_SECS, filled
from bench.process import CpuMeter, GatewayProc, fake_llm, gateway_process, shipped_config
from bench.real_path import two_turns


async def run(
    other: str, rounds: int = 12, clients: int = 8, seconds: float = 4.0
) -> dict[str, Any]:
    each = max(1, clients // 2)
    this_ms: list[float] = []
    other_ms: list[float] = []
    async with AsyncExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="picobot-bench-")))
        llm = await stack.enter_async_context(fake_llm(0.0, tmp, record=0))
        gateways = [
            await stack.enter_async_context(gateway_process(shipped_config(llm.base_url))),
            await stack.enter_async_context(
                gateway_process(shipped_config(llm.base_url), code=other)
            ),
        ]
        for gw in gateways:
            await two_turns(gw.ws_url)
        await asyncio.gather(*(run_load(gw.ws_url, each, 1.0) for gw in gateways))  # warm
        for _ in range(rounds):
            meters = [CpuMeter(gw.pid) for gw in gateways]
            for meter in meters:
                meter.start()
            loads = await asyncio.gather(*(run_load(gw.ws_url, each, seconds) for gw in gateways))
            ours, theirs = (
                meter.stop(load["answered_in_all"])["cpu_ms_per_message"]
                for meter, load in zip(meters, loads, strict=True)
            )
            this_ms.append(ours)
            other_ms.append(theirs)
    return {
        "scenario": "paired",
        "other": other,
        "clients_each": each,
        "rounds": rounds,
        "seconds": seconds,
        **_compared(this_ms, other_ms),
    }


async def run_history(
    other: str, history: int, rounds: int = 12, turns: int = 20
) -> dict[str, Any]:
    """Turns in a chat of `history` short messages (stored before the
    gateways start): in each round `turns` on one gateway, then `turns` on
    the other (which goes first alternates), one turn at a time, so that the
    two see the machine alike. The cost
    of a turn in a long chat, where `run` gives throughput in short ones."""
    this_ms: list[float] = []
    other_ms: list[float] = []
    async with AsyncExitStack() as stack:
        homes = [
            Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="picobot-bench-")))
            for _ in range(2)
        ]
        for home in homes:
            await filled(home, {"long": (history, 20)})
        llm = await stack.enter_async_context(fake_llm(0.0, homes[0], record=0))
        config = shipped_config(llm.base_url)
        gateways = [
            await stack.enter_async_context(gateway_process(config, homes[0])),
            await stack.enter_async_context(gateway_process(config, homes[1], code=other)),
        ]
        sockets = [await connect(gw.ws_url, "long") for gw in gateways]
        try:
            for ws in sockets:
                await ask(ws, "open", "hello")  # the chat opened from storage
            sides = list(zip(gateways, sockets, (this_ms, other_ms), strict=True))
            for r in range(rounds):
                for gw, ws, out in sides if r % 2 == 0 else sides[::-1]:  # each first in turn
                    out.append(await _turns(gw, ws, f"r{r}", turns))
        finally:
            for ws in sockets:
                await ws.close()
    return {
        "scenario": "paired_history",
        "other": other,
        "history_messages": history,
        "rounds": rounds,
        "turns": turns,
        **_compared(this_ms, other_ms),
    }


async def _turns(gw: GatewayProc, ws: websockets.ClientConnection, tag: str, turns: int) -> float:
    meter = CpuMeter(gw.pid)
    meter.start()
    for i in range(turns):
        await ask(ws, f"{tag}-{i}", f"turn {tag} {i}")
    await asyncio.sleep(SETTLE_SECS)
    cpu: float = meter.stop(turns)["cpu_ms_per_message"]
    return cpu


def _compared(this_ms: list[float], other_ms: list[float]) -> dict[str, Any]:
    """Each round's ratio (other ÷ this), their median and spread, and each side's median."""
    ratios = [round(theirs / ours, 4) for ours, theirs in zip(this_ms, other_ms, strict=True)]
    return {
        "this_cpu_ms_per_message": round(statistics.median(this_ms), 3),
        "other_cpu_ms_per_message": round(statistics.median(other_ms), 3),
        "ratio_median": statistics.median(ratios),
        "ratio_stdev": round(statistics.stdev(ratios), 4) if len(ratios) > 1 else 0.0,
        "ratios": ratios,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.paired")
    parser.add_argument("other", help="another checkout of picobot (its gateway is B)")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--clients", type=int, default=8, help="in all, half on each gateway")
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument(
        "--history", type=int, default=0, help="turns in a chat of this many messages instead"
    )
    parser.add_argument("--turns", type=int, default=20, help="per round and gateway (--history)")
    args = parser.parse_args()
    if args.history:
        result = asyncio.run(run_history(args.other, args.history, args.rounds, args.turns))
    else:
        result = asyncio.run(run(args.other, args.rounds, args.clients, args.seconds))
    print(json.dumps(result))
