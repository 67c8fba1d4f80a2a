"""`picobot jobs list|show|run|pause|resume|delete`: scheduler jobs, straight on the database.

Works whether or not the gateway is running: every command is one SQLite
transaction. A running gateway notices `run` and `resume` at its next look at
the database (at the latest after `scheduler.rescan_interval_secs`); `pause`
and `delete` take effect at once, because the engine re-reads a job's row when
it claims a run. The CLI is the operator's: it sees and controls every job,
whoever owns it (the OWNER column; `-` for config, built-in and pre-owner jobs).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from datetime import tzinfo
from typing import Any

from gateway.config.loading import LoadedConfig
from scheduler.admin import JobAdmin, JobView, SchedulerError
from scheduler.clock import SystemClock
from scheduler.manage import OPERATOR_ACTIONS, operator_action
from scheduler.owners import OPERATOR
from storage.backends import open_database

__all__ = ["add_jobs_parser", "print_jobs_help", "run_jobs_command"]


def add_jobs_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    with_config: Callable[[argparse.ArgumentParser], argparse.ArgumentParser] = lambda p: p,
) -> None:
    """`with_config` adds the shared --config option to each subcommand."""
    parser = subparsers.add_parser("jobs", help="list and control scheduler jobs")
    # no sub-command: help, not an error (print_jobs_help)
    parser.set_defaults(jobs_help=parser.format_help)
    commands = parser.add_subparsers(dest="jobs_command", metavar="COMMAND")
    listing = with_config(commands.add_parser("list", help="every job with its state and next run"))
    listing.add_argument("--json", action="store_true", help="print JSON")
    show = with_config(commands.add_parser("show", help="one job: definition and recent runs"))
    show.add_argument("job_id")
    show.add_argument("--runs", type=int, default=20, help="how many recent runs (default 20)")
    for name, text in (
        ("run", "run a job once, as soon as the gateway sees the request"),
        ("pause", "stop a job from firing until resumed"),
        ("resume", "let a paused job fire again (its timing restarts from now)"),
        ("delete", "delete a job created at run time, with its history"),
    ):
        with_config(commands.add_parser(name, help=text)).add_argument("job_id")


def print_jobs_help(args: argparse.Namespace) -> int:
    """`picobot jobs` alone: the sub-commands, exit 0."""
    print(args.jobs_help(), end="")
    return 0


async def run_jobs_command(args: argparse.Namespace, loaded: LoadedConfig) -> int:
    zone = loaded.config.time.zone
    async with open_database(loaded.storage_url) as db:
        admin = JobAdmin(db, clock=SystemClock(), default_zone=zone)
        try:
            return await _dispatch(args, admin, zone, loaded)
        except SchedulerError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1


async def _dispatch(
    args: argparse.Namespace, admin: JobAdmin, zone: tzinfo, loaded: LoadedConfig
) -> int:
    command: str = args.jobs_command
    if command == "list":
        views = await admin.list_jobs(caller=OPERATOR)
        if args.json:
            print(json.dumps([v.to_dict(zone) for v in views], indent=2, ensure_ascii=False))
        else:
            _print_table(views, zone)
        return 0
    if command == "show":
        view = await admin.get(args.job_id, caller=OPERATOR, runs=max(args.runs, 0))
        print(json.dumps(view.to_dict(zone, full=True), indent=2, ensure_ascii=False))
        return 0
    if command not in OPERATOR_ACTIONS:
        print(f"error: unknown jobs command {command!r}", file=sys.stderr)
        return 2
    changed = await operator_action(admin, command, args.job_id)
    if command == "run":
        rescan = loaded.config.scheduler.rescan_interval_secs
        when = f"within {rescan:g}s" if rescan > 0 else "at its next wake-up"
        print(
            f"run of {args.job_id!r} requested: a running gateway starts it {when}, "
            "otherwise the gateway runs it when it starts"
        )
        return 0
    if changed is None:
        print(f"deleted job {args.job_id!r}")
        return 0
    summary = changed.to_dict(zone)
    print(f"{summary['id']}: {summary['state']}, next run {summary['next_run_at'] or '-'}")
    return 0


def describe_schedule(schedule: Any) -> str:
    if not isinstance(schedule, dict):
        return "?"
    kind = schedule.get("type")
    zone = f" ({schedule['timezone']})" if schedule.get("timezone") else ""
    if kind == "delay":
        return f"once, {schedule.get('seconds'):g}s after creation"
    if kind == "interval":
        return f"every {schedule.get('seconds'):g}s"
    if kind == "at":
        return f"once at {schedule.get('at')}{zone}"
    if kind == "cron":
        return f"cron '{schedule.get('expression')}'{zone}"
    return str(kind)


def _print_table(views: list[JobView], zone: tzinfo) -> None:
    if not views:
        print("no jobs")
        return
    header = ("ID", "KIND", "SOURCE", "OWNER", "STATE", "SCHEDULE", "NEXT RUN", "LAST RUN")
    rows: list[tuple[str, ...]] = [header]
    for view in views:
        data = view.to_dict(zone)
        last = data["last_run"]
        rows.append(
            (
                data["id"],
                data["kind"],
                data["source"],
                data["owner"] or "-",
                data["state"],
                describe_schedule(data["schedule"]),
                data["next_run_at"] or "-",
                f"{last['status']} {last['scheduled_at']}" if last else "-",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for row in rows:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )
