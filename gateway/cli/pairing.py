"""`picobot pairing list|approve|revoke`: pairings on the host, straight on the database.

Works whether or not the gateway is running: each command is one transaction,
and the gateway reads pairings from the database for every message it judges,
so an approval or a revocation counts from the sender's next message. The
host's approvals are recorded as approved by "host"; the new user's notice goes
out at the running gateway's next outbox rescan (`gateway.outbox_rescan_secs`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from datetime import UTC, datetime

from gateway.access.pairing import (
    approval_text,
    approved_notice,
    describe_pairing,
    parse_code,
    parse_who,
)
from gateway.config.loading import LoadedConfig
from gateway.i18n.locales import LocaleResolver
from storage.backends import open_database
from storage.sql.access.pairings import ApproveOutcome
from storage.store import Store

__all__ = ["HOST", "add_pairing_parser", "run_pairing_command"]

HOST = "host"  # approved_by for approvals made with this command


def add_pairing_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    with_config: Callable[[argparse.ArgumentParser], argparse.ArgumentParser] = lambda p: p,
) -> None:
    """`with_config` adds the shared --config option to each subcommand."""
    parser = subparsers.add_parser("pairing", help="let new users in with pairing codes")
    commands = parser.add_subparsers(dest="pairing_command", required=True, metavar="COMMAND")
    with_config(commands.add_parser("list", help="approved senders and pending codes"))
    approve = with_config(commands.add_parser("approve", help="approve a pending code"))
    approve.add_argument("code", help="the XXXX-XXXX code the new user was given")
    revoke = with_config(commands.add_parser("revoke", help="end a sender's access"))
    revoke.add_argument("who", help="channel:sender_id, as `list` shows it")


async def run_pairing_command(
    args: argparse.Namespace,
    loaded: LoadedConfig,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> int:
    async with open_database(loaded.storage_url) as db:
        store = Store(db)
        if args.pairing_command == "approve":
            code = parse_code(args.code)
            if code is None:
                print(f"error: {args.code!r} is not a pairing code (XXXX-XXXX)", file=sys.stderr)
                return 2
            # the new user's notice speaks the language of their channel, as the gateway would
            locales = LocaleResolver.from_config(loaded.config)
            notice = approved_notice(locales.for_channel)
            result = await store.approve_pairing(code, HOST, now(), notice)
            print(approval_text(code, result))
            return 0 if result.outcome is ApproveOutcome.APPROVED else 1
        if args.pairing_command == "revoke":
            who = parse_who(args.who)
            if who is None:
                print(f"error: {args.who!r} is not channel:sender_id", file=sys.stderr)
                return 2
            if not await store.revoke_pairing(*who, now()):
                print(f"{args.who} has no pairing to revoke")
                return 1
            print(f"revoked {args.who}: their pairing no longer admits them, from the next message")
            return 0
        found = await store.list_pairings(now())
        if not found:
            print("no pairings and no pending codes")
        for pairing in found:
            print(describe_pairing(pairing))
        return 0
