"""`make bench`: run the scenarios, write bench/results/*.json, print a summary."""

from __future__ import annotations

import argparse
import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path

from bench import fanout, memory_search, sustained
from bench.harness import machine, quiet_logs

RESULTS = Path(__file__).resolve().parent / "results"


async def main(args: argparse.Namespace) -> None:
    quiet_logs()
    RESULTS.mkdir(exist_ok=True)
    runs = []
    if args.scenario in ("all", "fanout"):
        runs.append(await fanout.run(chats=args.chats))
    if args.scenario in ("all", "sustained"):
        for clients in args.clients:  # 1 client: latency alone; more: throughput under load
            runs.append(await sustained.run(clients=clients, seconds=args.seconds))
    if args.scenario in ("all", "memory_search"):
        runs.append(await memory_search.run(memories=args.memories))
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    for result in runs:
        result.update({"measured_at": stamp, "machine": machine()})
        name = result["scenario"] + (f"-{result['clients']}" if "clients" in result else "")
        (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
        print(json.dumps(result))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument(
        "scenario",
        nargs="?",
        default="all",
        choices=["all", "fanout", "sustained", "memory_search"],
    )
    parser.add_argument("--chats", type=int, default=200)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4, 8, 16])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--memories", type=int, default=10_000, help="per scope (memory_search)")
    asyncio.run(main(parser.parse_args()))
