"""`picobot memory list|show|search|delete|export`: what picobot remembers, per user.

Straight on the database, with or without a running gateway (each command is
one SQLite transaction). A scope is written `channel:sender_id`, as /whoami
shows it. `delete` of a whole scope also removes its audit trail and its
summary; AGENT.md's block drops that section at the next maintenance run.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

from gateway.config.loading import LoadedConfig
from gateway.memory.service import entry_of
from storage.backends import open_database
from storage.sql.memory.memories import MemoryRow, Scope
from storage.units.memories import MemoryStore

__all__ = ["add_memory_parser", "run_memory_command"]


def add_memory_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    with_config: Callable[[argparse.ArgumentParser], argparse.ArgumentParser] = lambda p: p,
) -> None:
    parser = subparsers.add_parser("memory", help="long-term memories, per user")
    commands = parser.add_subparsers(dest="memory_command", required=True, metavar="COMMAND")
    with_config(commands.add_parser("list", help="every user with memories: count, summary"))
    show = with_config(commands.add_parser("show", help="one user's memories and summary"))
    show.add_argument("scope", help="channel:sender_id")
    search = with_config(commands.add_parser("search", help="search one user's memories"))
    search.add_argument("scope")
    search.add_argument("query")
    search.add_argument("--limit", type=int, default=10)
    delete = with_config(commands.add_parser("delete", help="delete one entry, or --all"))
    delete.add_argument("scope")
    delete.add_argument("entry", nargs="?", help="NAMESPACE/KEY")
    delete.add_argument("--all", action="store_true", help="everything kept about this user")
    export = with_config(commands.add_parser("export", help="JSON of one user, or everyone"))
    export.add_argument("scope", nargs="?")


def _scope(text: str) -> Scope:
    return Scope("user", text)


def _line(row: MemoryRow) -> str:
    return f"{row.namespace}/{row.memory_key}  [{row.source.source_type}, {row.updated_at}]  {row.content}"


async def run_memory_command(args: argparse.Namespace, loaded: LoadedConfig) -> int:
    async with open_database(loaded.storage_url) as db:
        store = MemoryStore(db)
        command: str = args.memory_command
        if command == "list":
            infos = await store.scopes()
            if not infos:
                print("no memories")
            for info in infos:
                has = "summary" if info.summary else "no summary"
                print(f"{info.scope.key}  {info.entries} entries, {has}")
            return 0
        if command in ("show", "search"):
            scope = _scope(args.scope)
            if command == "show":
                rows = await store.entries(scope, None)
            else:
                rows = await store.search(scope, args.query, None, max(1, min(args.limit, 50)))
            for row in rows:
                print(_line(row))
            summary = await store.summary(scope) if command == "show" else None
            if summary:
                print(f"\nsummary:\n{summary}")
            return 0
        if command == "delete":
            return await _delete(store, args)
        if command == "export":
            wanted = [_scope(args.scope)] if args.scope else [i.scope for i in await store.scopes()]
            out = {}
            for scope in wanted:
                entries = [entry_of(r) for r in await store.entries(scope, None)]
                out[scope.key] = {
                    "summary": await store.summary(scope),
                    "memories": [
                        {"namespace": e.namespace, "memory_key": e.key, "content": e.content,
                         "source_type": e.source_type, "category": e.category,
                         "updated_at": e.updated_at}
                        for e in entries
                    ],
                }  # fmt: skip
            print(json.dumps(out, indent=2, ensure_ascii=False))
            return 0
    print(f"error: unknown memory command {command!r}", file=sys.stderr)
    return 2


async def _delete(store: MemoryStore, args: argparse.Namespace) -> int:
    scope = _scope(args.scope)
    if args.all:
        count = await store.forget(scope)
        print(f"deleted everything kept about {scope.key} ({count} entries)")
        return 0
    namespace, sep, key = (args.entry or "").partition("/")
    if not sep or not namespace or not key:
        print("error: give NAMESPACE/KEY or --all", file=sys.stderr)
        return 2
    if not await store.delete(scope, namespace, key):
        print(f"error: {scope.key} has no memory {namespace}/{key}", file=sys.stderr)
        return 1
    print(f"deleted {namespace}/{key} of {scope.key}")
    return 0
