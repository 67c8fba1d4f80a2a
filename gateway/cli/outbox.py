"""`picobot outbox list|retry|discard`: undelivered replies, straight on the database.

Works whether or not the gateway is running: each command is one read or one
write transaction. A running gateway sends a retried row at its next rescan
of the outbox (`gateway.outbox_rescan_secs`); a discarded row is never sent
(the console's discard is the same function). `list` shows each row's age and
when it goes next as the database has it (a degraded channel's sender writes
its next probe time there).
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable
from datetime import UTC, datetime

from gateway.config.loading import LoadedConfig
from gateway.turns.replies import format_duration
from storage.backends import open_database
from storage.clock import parse_iso
from storage.sql.delivery import outbox

__all__ = ["add_outbox_parser", "run_outbox_command"]


def add_outbox_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    with_config: Callable[[argparse.ArgumentParser], argparse.ArgumentParser] = lambda p: p,
) -> None:
    """`with_config` adds the shared --config option to each subcommand."""
    ob = subparsers.add_parser("outbox", help="inspect, retry or discard undelivered replies")
    ob_sub = ob.add_subparsers(dest="action", required=True)
    ob_list = with_config(ob_sub.add_parser("list", help="rows not yet sent"))
    ob_list.add_argument("--failed", action="store_true", help="only rows that gave up")
    ob_retry = with_config(ob_sub.add_parser("retry", help="queue a failed row again"))
    ob_retry.add_argument("id", type=int)
    ob_discard = with_config(ob_sub.add_parser("discard", help="give a failed row up for good"))
    ob_discard.add_argument("id", type=int)


async def run_outbox_command(args: argparse.Namespace, loaded: LoadedConfig) -> int:
    async with open_database(loaded.storage_url) as db:
        if args.action == "retry":
            ok = await db.write(functools.partial(outbox.retry_row, row_id=args.id))
            if not ok:
                print(f"outbox row {args.id} is not failed or parked; nothing to retry")
                return 1
            print(
                f"outbox row {args.id} queued again; a running gateway sends it within "
                f"{loaded.config.gateway.outbox_rescan_secs:g} seconds"
            )
            return 0
        if args.action == "discard":
            channel = await db.write(functools.partial(outbox.discard_row, row_id=args.id))
            if channel is None:
                print(f"outbox row {args.id} is not failed or parked; nothing to discard")
                return 1
            print(f"outbox row {args.id} discarded: it is never sent")
            return 0
        rows = await db.read(functools.partial(outbox.list_rows, failed_only=args.failed))
        if not rows:
            print("no failed rows" if args.failed else "the outbox is empty")
        now = datetime.now(UTC)
        for r in rows:
            text = r.text.replace("\n", " ")
            preview = text[:60] + ("…" if len(text) > 60 else "")
            age = format_duration((now - parse_iso(r.created_at)).total_seconds())
            print(
                f"{r.id}\t{r.state.value}\t{r.channel}:{r.chat_id}\tattempts={r.attempts}\t"
                f"age={age}\tnext={_next_attempt(r, now)}\t{preview}"
            )
            if r.last_error:
                print(f"\t\tlast error: {r.last_error}")
        return 0


def _next_attempt(row: outbox.OutboxRow, now: datetime) -> str:
    if row.state is outbox.OutboxState.PARKED:
        return "when the recipient is back"
    if row.state is not outbox.OutboxState.PENDING:
        return "never (outbox retry to queue it again, or discard)"
    if row.next_attempt_at is None:
        return "now"
    due_in = (parse_iso(row.next_attempt_at) - now).total_seconds()
    return "now" if due_in <= 0 else f"in {format_duration(due_in)}"
