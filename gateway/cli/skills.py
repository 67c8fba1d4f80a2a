"""`picobot skills list|show|events|disable|enable`: the skills this config
finds, one skill's SKILL.md, the recorded discovery and usage events, and
turning skills off and on.

`list` and `show` scan the sources themselves (the same roots and precedence
as the gateway), whether or not a gateway runs; `events` reads the database.
`disable` and `enable` edit the skill-state.json files as `skill_manage` and
the console do (`SkillRuntime.switch`): disable writes $PICOBOT_HOME's file
(`--project`: the project's), enable takes the names out of both. A running
gateway sees the change at its next look at the skill folders
(`skills.check_interval_secs`). Skills themselves are changed on disk or with
`skill_manage`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from typing import TextIO

from agent.tools.base import ToolError
from gateway.config.loading import LoadedConfig
from gateway.tools.skills import SkillRuntime, StoreSkillEvents, skill_roots
from skills.discovery import scan
from skills.index import IndexLimits
from skills.manage import Scope
from storage.backends import open_database
from storage.store import Store

__all__ = ["add_skills_parser", "run_skills_command"]


def add_skills_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    with_config: Callable[[argparse.ArgumentParser], argparse.ArgumentParser] = lambda p: p,
) -> None:
    parser = subparsers.add_parser("skills", help="the skills found, and their usage events")
    commands = parser.add_subparsers(dest="skills_command", required=True, metavar="COMMAND")
    with_config(
        commands.add_parser(
            "list", help="every skill: name, source, description; skipped files and why"
        )
    )
    show = with_config(commands.add_parser("show", help="one skill's folder, fields and body"))
    show.add_argument("name")
    events = with_config(commands.add_parser("events", help="recent skill events"))
    events.add_argument("name", nargs="?", help="only this skill's")
    events.add_argument("--limit", type=int, default=50, help="how many (default 50)")
    disable = with_config(commands.add_parser("disable", help="turn skills off (kept off)"))
    disable.add_argument("names", nargs="+", metavar="NAME")
    disable.add_argument("--project", action="store_true", help="in the project's skill-state.json")
    enable = with_config(commands.add_parser("enable", help="turn disabled skills back on"))
    enable.add_argument("names", nargs="+", metavar="NAME")


async def run_skills_command(
    args: argparse.Namespace, loaded: LoadedConfig, out: TextIO | None = None
) -> int:
    out = sys.stdout if out is None else out  # looked up now: tests replace sys.stdout
    command: str = args.skills_command
    if command == "events":
        async with open_database(loaded.storage_url) as db:
            rows = await Store(db).skill_events(args.name, max(1, args.limit))
        if not rows:
            print("no skill events", file=out)
        for r in rows:
            stamp = r.created_at.isoformat(timespec="seconds") if r.created_at else "?"
            where = f" {r.channel}:{r.chat_id}" if r.channel else ""
            detail = f" — {r.detail}" if r.detail else ""
            print(f"{stamp} {r.event:<10} {r.skill} ({r.source or '-'}){where}{detail}", file=out)
        return 0
    if command in ("disable", "enable"):
        return await _switch(args, loaded, out)
    if not loaded.config.skills.enabled:
        print("skills are disabled (skills.enabled: false)", file=out)
    found = await asyncio.to_thread(scan, skill_roots(loaded))
    if command == "show":
        skill = found.skills.get(args.name)
        if skill is None:
            state = " (disabled in a skill-state.json)" if args.name in found.disabled else ""
            print(f"picobot: no skill named {args.name!r}{state}", file=sys.stderr)
            return 1
        print(f"{skill.name} ({skill.source.value}): {skill.path}", file=out)
        for key, value in skill.metadata.items():
            print(f"  {key}: {value}", file=out)
        print(f"\n{skill.body}", file=out)
        return 0
    for skill in found.skills.values():
        print(f"{skill.name:<24} {skill.source.value:<16} {skill.description}", file=out)
    for bad in found.invalid:
        print(f"skipped: {bad.path}: {bad.reason}", file=out)
    for forgiven in found.lenient:
        print(f"warning: {forgiven.path}: {forgiven.reason} (loaded)", file=out)
    if found.disabled:
        print("disabled: " + ", ".join(sorted(found.disabled)), file=out)
    for problem in found.problems:
        print(f"problem: {problem}", file=out)
    return 0


async def _switch(args: argparse.Namespace, loaded: LoadedConfig, out: TextIO) -> int:
    enable = args.skills_command == "enable"
    scopes: list[Scope] = ["user", "project"] if enable else ["project" if args.project else "user"]
    cfg = loaded.config.skills
    async with open_database(loaded.storage_url) as db:
        runtime = SkillRuntime(
            skill_roots(loaded),
            IndexLimits(cfg.max_index_chars, cfg.max_listed_skills),
            StoreSkillEvents(Store(db)),
        )
        try:
            paths, unknown = await runtime.switch(
                args.names, enable=enable, scopes=scopes, detail="picobot skills"
            )
        except ToolError as exc:
            print(f"picobot: {exc}", file=sys.stderr)
            return 1
    done = "enabled" if enable else "disabled"
    print(f"{done}: {', '.join(args.names)} ({', '.join(str(p) for p in paths)})", file=out)
    if unknown:
        print(f"not found now (kept in the file): {', '.join(unknown)}", file=out)
    return 0
