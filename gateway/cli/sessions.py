"""`picobot sessions list`: the sessions active most recently, across every chat
and channel (or one channel or chat), with their titles and message counts;
`picobot sessions show <id>`: one session's active history straight from the
database, e.g. a sub-agent's transcript (`task:<parent>:<call id>`), with the
sub-agent sessions it started. Read-only; works whether or not the gateway runs.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

from agent.messages import ChatMessage
from gateway.config.loading import LoadedConfig
from storage.backends import open_database
from storage.clock import parse_iso
from storage.sql.conversations.sessions import SessionRecord
from storage.store import Store

__all__ = ["add_sessions_parser", "run_sessions_command"]


def add_sessions_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    with_config: Callable[[argparse.ArgumentParser], argparse.ArgumentParser] = lambda p: p,
) -> None:
    sessions = subparsers.add_parser("sessions", help="stored sessions and their transcripts")
    sub = sessions.add_subparsers(dest="action", required=True)
    listing = with_config(sub.add_parser("list", help="the most recently active sessions"))
    listing.add_argument("--channel", help="only this channel's (e.g. telegram, websocket)")
    listing.add_argument("--chat", help="only this chat's (its id on the channel)")
    listing.add_argument("--limit", type=int, default=50, help="at most this many (default 50)")
    listing.add_argument("--json", action="store_true", help="one JSON object per line")
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


def _local_time(stored: str) -> str:
    return parse_iso(stored).astimezone().strftime("%Y-%m-%d %H:%M")


def _row(record: SessionRecord) -> str:
    title = record.title or ""
    chat = f"{record.channel}:{record.chat_id}"
    return (
        f"{_local_time(record.updated_at)}  {record.status.value:<8}  "
        f"{record.message_count:>5}  {record.id}  ({chat})  {title}"
    ).rstrip()


async def _list(args: argparse.Namespace, loaded: LoadedConfig) -> int:
    if args.limit < 1:
        print("--limit must be at least 1")
        return 2
    async with open_database(loaded.storage_url) as db:
        records = await Store(db).recent_sessions(args.channel, args.chat, args.limit)
    if args.json:
        for r in records:
            fields = ("id", "channel", "chat_id", "title", "message_count", "updated_at")
            row = {k: getattr(r, k) for k in fields} | {"status": r.status.value}
            print(json.dumps(row, ensure_ascii=False))
        return 0
    if not records:
        print("no sessions")
        return 0
    print("last active       status    msgs  session  (channel:chat)  title")
    for record in records:
        print(_row(record))
    return 0


async def run_sessions_command(args: argparse.Namespace, loaded: LoadedConfig) -> int:
    if args.action == "list":
        return await _list(args, loaded)
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
