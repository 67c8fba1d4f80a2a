"""`picobot dead-letters list|show|retry|discard`: inbound events kept because they
could not be parsed or recorded (storage/sql/delivery/dead_letters.py), straight
on the database.

Works whether or not the gateway is running; each command is one transaction.
A dead letter is here so that an operator can see what a platform sent. One
that is a message the gateway wrote (the inbox refused it, or it was set aside
at start) can be retried: `retry` records it in the inbox, where the next
start of the gateway answers it (the console of a running gateway retries it
through the same function and answers it at once). `discard` deletes one.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable

from gateway.config.loading import LoadedConfig
from storage.backends import open_database
from storage.database import Database
from storage.errors import StorageClosed, StorageUnavailable
from storage.sql.delivery import dead_letters, inbox

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
    dl_retry = with_config(dl_sub.add_parser("retry", help="record a dead letter's message again"))
    dl_retry.add_argument("id", type=int)
    dl_discard = with_config(dl_sub.add_parser("discard", help="delete a dead letter"))
    dl_discard.add_argument("id", type=int)


async def run_dead_letters_command(args: argparse.Namespace, loaded: LoadedConfig) -> int:
    async with open_database(loaded.storage_url) as db:
        if args.action == "retry":
            return await _retry(db, args.id)
        if args.action == "discard":
            if not await db.write(functools.partial(dead_letters.discard, letter_id=args.id)):
                print(f"no dead letter {args.id}")
                return 1
            print(f"dead letter {args.id} discarded")
            return 0
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


async def _retry(db: Database, letter_id: int) -> int:
    try:
        requeued = await db.write(functools.partial(inbox.requeue_dead_letter, letter_id=letter_id))
    except inbox.NotAMessage as exc:
        print(str(exc))
        return 1
    except (StorageUnavailable, StorageClosed):
        raise
    except Exception as exc:  # the inbox refused it alone, as it did the first time
        print(f"the inbox refused dead letter {letter_id} again ({type(exc).__name__}: {exc})")
        return 1
    if requeued is None:
        print(f"no dead letter {letter_id}")
        return 1
    if requeued.inbox_id is None:
        print(f"dead letter {letter_id} was in the inbox already; the dead letter is gone")
        return 0
    print(
        f"dead letter {letter_id} recorded as inbox row {requeued.inbox_id}; the gateway "
        "answers it when it next starts (a running gateway's console retries at once)"
    )
    return 0
