"""`picobot dead-letters list|show`: inbound events kept because they could not be
parsed or recorded (storage/sql/delivery/dead_letters.py), straight on the database.

Read-only; works whether or not the gateway is running. A dead letter is never
answered: it is here so that an operator can see what a platform sent.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable

from gateway.config.loading import LoadedConfig
from storage.backends import open_database
from storage.sql.delivery import dead_letters

__all__ = ["add_dead_letters_parser", "run_dead_letters_command"]


def add_dead_letters_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    with_config: Callable[[argparse.ArgumentParser], argparse.ArgumentParser] = lambda p: p,
) -> None:
    dl = subparsers.add_parser("dead-letters", help="inbound events that could not be recorded")
    dl_sub = dl.add_subparsers(dest="action", required=True)
    dl_list = with_config(dl_sub.add_parser("list", help="the newest dead letters"))
    dl_list.add_argument("--channel", help="only this channel's")
    dl_list.add_argument("--limit", type=int, default=50)
    dl_show = with_config(dl_sub.add_parser("show", help="one dead letter with its payload"))
    dl_show.add_argument("id", type=int)


async def run_dead_letters_command(args: argparse.Namespace, loaded: LoadedConfig) -> int:
    async with open_database(loaded.storage_url) as db:
        if args.action == "show":
            letter = await db.read(functools.partial(dead_letters.get, letter_id=args.id))
            if letter is None:
                print(f"no dead letter {args.id}")
                return 1
            print(f"id:          {letter.id}")
            print(f"channel:     {letter.channel}")
            print(f"platform id: {letter.platform_id or '-'}")
            print(f"at:          {letter.created_at}")
            print(f"reason:      {letter.reason}")
            cap = f" (truncated to {dead_letters.PAYLOAD_MAX_CHARS} characters)"
            print(f"payload{cap if letter.truncated else ''}:")
            print(letter.payload)
            return 0
        letters = await db.read(
            functools.partial(dead_letters.recent, limit=max(1, args.limit), channel=args.channel)
        )
        if not letters:
            print("no dead letters")
        for d in letters:
            print(f"{d.id}\t{d.created_at}\t{d.channel}\t{d.platform_id or '-'}\t{d.reason}")
        return 0
