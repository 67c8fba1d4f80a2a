"""`picobot sessions show <id>`: one session's active history straight from the
database, e.g. a sub-agent's transcript (`task:<parent>:<call id>`), with the
sub-agent sessions it started. Read-only; works whether or not the gateway runs.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from agent.messages import ChatMessage
from gateway.config.loading import LoadedConfig
from storage.backends import open_database
from storage.store import Store

__all__ = ["add_sessions_parser", "run_sessions_command"]


def add_sessions_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    with_config: Callable[[argparse.ArgumentParser], argparse.ArgumentParser] = lambda p: p,
) -> None:
    sessions = subparsers.add_parser("sessions", help="stored sessions and their transcripts")
    sub = sessions.add_subparsers(dest="action", required=True)
    show = with_config(sub.add_parser("show", help="a session's messages and its sub-agents"))
    show.add_argument("id", help="session id (e.g. telegram:42, task:<parent>:<call id>)")


def _line(message: ChatMessage) -> str:
    head = f"[{message.seq}] {message.role.value}"
    if message.marker:
        head += f" ({message.marker})"
    if message.name:
        head += f" {message.name}#{message.tool_call_id}"
    calls = "".join(f"\n    → {c.name}#{c.id} {c.arguments}" for c in message.tool_calls)
    return f"{head}: {message.content}{calls}"


async def run_sessions_command(args: argparse.Namespace, loaded: LoadedConfig) -> int:
    async with open_database(loaded.storage_url) as db:
        store = Store(db)
        record, history = await store.history_snapshot(args.id)
        if record is None:
            print(f"no session {args.id!r}")
            return 1
        children = await store.transcripts.children_of(record.id)
    print(f"session {record.id}  ({record.channel}:{record.chat_id}, {record.status.value})")
    if record.title:
        print(f"title: {record.title}")
    for message in history:
        print(_line(message))
    for child in children:
        print(f"sub-agent: {child.id}  {child.title or ''}".rstrip())
    return 0
