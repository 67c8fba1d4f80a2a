"""`picobot workers`: the workers of a deployment on one PostgreSQL database
(docs/scale-out.md), straight from the database: each worker's name, id,
address, pid, age of its last heartbeat, whether it is alive, and the leases
it holds (channels by name, chats counted). A worker presumed dead is listed
for an hour after its last heartbeat; one that stopped cleanly is gone.
`--json` prints the same as one JSON document."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from gateway.config.loading import LoadedConfig
from gateway.turns.replies import format_duration
from storage.backends import open_database
from storage.sql.cluster import CHANNEL_PREFIX, CHAT_PREFIX, LeaseHolder, WorkerRow
from storage.store import Store

__all__ = ["add_workers_parser", "run_workers_command", "workers_report"]


def add_workers_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    with_config: Callable[[argparse.ArgumentParser], argparse.ArgumentParser] = lambda p: p,
) -> None:
    workers = with_config(
        subparsers.add_parser("workers", help="the workers sharing this database and their leases")
    )
    workers.add_argument("--json", action="store_true", help="print JSON")


def workers_report(rows: list[WorkerRow], leases: list[LeaseHolder]) -> list[dict[str, Any]]:
    report = []
    for w in rows:
        held = [lease.key for lease in leases if lease.owner == w.id]
        report.append(
            {
                "id": w.id,
                "name": w.name,
                "address": w.address,
                "host": w.host,
                "pid": w.pid,
                "alive": w.alive,
                "heartbeat_age_secs": round(max(0.0, w.now - w.heartbeat_at), 1),
                "started_age_secs": round(max(0.0, w.now - w.started_at), 1),
                "channels": sorted(
                    k[len(CHANNEL_PREFIX) :] for k in held if k.startswith(CHANNEL_PREFIX)
                ),
                "chats": sum(1 for k in held if k.startswith(CHAT_PREFIX)),
            }
        )
    return report


async def run_workers_command(args: argparse.Namespace, loaded: LoadedConfig) -> int:
    async with open_database(loaded.storage_url) as db:
        if not db.shared:
            print(
                f"{db.describe} is SQLite: one gateway, no workers. Several workers need "
                "storage.url on PostgreSQL (docs/scale-out.md)."
            )
            return 1
        rows, leases = await Store(db).cluster.workers()
    report = workers_report(rows, leases)
    if args.json:
        print(json.dumps({"workers": report}, indent=2))
        return 0
    if not report:
        print("no workers: no gateway runs on this database")
        return 0
    for w in report:
        state = "alive" if w["alive"] else "DEAD"
        channels = ",".join(w["channels"]) or "-"
        print(
            f"{w['name']}\t{w['id']}\t{w['address']}\t{state}\t"
            f"heartbeat {format_duration(w['heartbeat_age_secs'])} ago\t"
            f"up {format_duration(w['started_age_secs'])}\tchannels={channels}\tchats={w['chats']}"
        )
    return 0
