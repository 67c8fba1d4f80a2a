"""`make bench`: run the scenarios, write bench/results/*.json, print a summary.

The headline figures come from the real path (bench.real_path, bench.history,
bench.startup: the `picobot gateway` process on shipped defaults against a
fake LLM process over HTTP); `sustained` and `fanout` are the secondary
"gateway only" figures (an in-process gateway, an instant provider, warning
logs). Every result carries the machine's calibration and its ms figures
divided by it (`per_calibration`), so that runs on different days compare.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import (
    cluster,
    fanout,
    history,
    memory_search,
    providers,
    real_path,
    real_postgres,
    startup,
    sustained,
)
from bench.harness import calibration_ms, machine, quiet_logs

RESULTS = Path(__file__).resolve().parent / "results"


SCENARIOS = (
    "real_sustained",
    "real_fanout",
    "real_sustained_postgres",
    "real_sustained_cluster",
    "history_scaling",
    "big_session",
    "startup",
    "providers",
    "fanout",
    "sustained",
    "memory_search",
)


# A figure's unit is a part of its name ("cpu_ms_per_message", "p50_ms",
# "wall_secs_until_last_reply"); a scenario's inputs are not figures.
_UNIT = re.compile(r"(?:^|_)(ms|secs)(?:_|$)")
_INPUTS = frozenset({"llm_latency_secs", "seconds"})


def per_calibration(result: dict[str, Any], calibration_ms: float) -> dict[str, float]:
    """Every ms or secs figure (at any depth) divided by the calibration in ms."""
    out: dict[str, float] = {}

    def walk(prefix: str, node: object) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(f"{prefix}{key}.", value)
        elif isinstance(node, int | float) and not isinstance(node, bool):
            name = prefix.rstrip(".")
            leaf = name.rsplit(".", 1)[-1]
            unit = _UNIT.search(leaf)
            if unit is None or leaf in _INPUTS or leaf.startswith("target"):
                return
            ms = node * 1000 if unit.group(1) == "secs" else node
            out[name] = round(ms / calibration_ms, 4)

    walk("", {k: v for k, v in result.items() if k not in ("targets", "machine")})
    return out


def _summary(result: dict[str, Any]) -> str:
    """A human line for the scenarios that compare things (empty for the rest:
    their JSON line is their summary)."""
    if result["scenario"] == real_postgres.SCENARIO:
        return real_postgres.summary(result)
    if result["scenario"] == cluster.SCENARIO:
        return cluster.summary(result)
    return ""


Run = Callable[[], Awaitable[dict[str, Any]]]


def _runs(name: str, args: argparse.Namespace) -> list[Run]:
    """The scenario's runs (one per client count where it has several)."""
    if name == "real_sustained":
        return [functools.partial(real_path.sustained, clients=c, seconds=args.seconds)
                for c in args.clients]  # fmt: skip
    if name == "real_sustained_postgres":  # one client count: the 8 by default
        return [functools.partial(real_postgres.run, clients=max(args.clients),
                                  seconds=args.seconds)]  # fmt: skip
    if name == "real_sustained_cluster":  # 1 worker, then 2, on one PostgreSQL server
        return [functools.partial(cluster.run, clients=max(args.clients),
                                  seconds=args.seconds, workers=tuple(args.workers))]  # fmt: skip
    if name == "real_fanout":
        return [functools.partial(real_path.fanout, chats=args.fanout_chats)]
    if name == "history_scaling":
        return [history.scaling]
    if name == "big_session":
        return [history.big_session]
    if name == "startup":
        return [startup.run]
    if name == "providers":
        return [providers.run]
    if name == "fanout":
        return [functools.partial(fanout.run, chats=args.chats)]
    if name == "sustained":
        return [functools.partial(sustained.run, clients=c, seconds=args.seconds)
                for c in args.clients]  # fmt: skip
    return [functools.partial(memory_search.run, memories=args.memories)]


async def main(args: argparse.Namespace) -> None:
    quiet_logs()
    RESULTS.mkdir(exist_ok=True)
    names = SCENARIOS if args.scenario == "all" else (args.scenario,)
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    summaries: list[str] = []
    for name in names:
        for run in _runs(name, args):
            # The machine's speed drifts within minutes: each run is divided
            # by the mean of a calibration just before it and one just after.
            calibration = machine()
            before = calibration["calibration_ms"]
            result = await run()
            after = calibration_ms()
            calibration.update(
                calibration_ms=round((before + after) / 2, 1),
                calibration_before_ms=before,
                calibration_after_ms=after,
            )
            result.update({"measured_at": stamp, "machine": calibration})
            result["per_calibration"] = per_calibration(result, calibration["calibration_ms"])
            suffix = f"-{result['clients']}" if "clients" in result else ""
            (RESULTS / f"{result['scenario']}{suffix}.json").write_text(
                json.dumps(result, indent=2) + "\n"
            )
            print(json.dumps(result))
            summaries.append(_summary(result))
    print("\n".join(line for line in summaries if line))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument(
        "scenario",
        nargs="?",
        default="all",
        choices=["all", *SCENARIOS],
    )
    parser.add_argument("--chats", type=int, default=200, help="fanout (gateway only)")
    parser.add_argument("--fanout-chats", type=int, default=100, help="real_fanout")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument(
        "--workers", type=int, nargs="+", default=list(cluster.WORKER_COUNTS),
        help="real_sustained_cluster: the worker counts, each on a fresh database",
    )  # fmt: skip
    parser.add_argument("--memories", type=int, default=10_000, help="per scope (memory_search)")
    asyncio.run(main(parser.parse_args()))
