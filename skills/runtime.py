"""The skill runtime: the current skills, the index text, and what the skill
tools do (`SkillService`).

The scan is cached; `current()` compares the cheap fingerprint (listings and
stats, in a worker thread) once per call and rescans only when something on
disk changed, so an added, edited or removed SKILL.md shows in the next turn
without a restart and an unchanged disk is never re-read. `skill_manage`
writes reload once. Every disk access runs off the event loop, in a worker
thread bounded by `scan_timeout_secs`: when it is slow, turns go on with the
last good scan (one warning) and no second look starts until it has ended,
so a slow or hostile file never holds up a chat, start-up or /health.
"""

from __future__ import annotations

import asyncio
import functools
import math
import os
import stat
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import structlog

from agent.tools.base import ToolArgs, ToolContext, ToolError
from agent.tools.confined import open_dir
from skills.discovery import Scan, SkillRoots, fingerprint, scan
from skills.events import SkillEvent, SkillEventKind, SkillEventSink
from skills.index import IndexLimits, render_index
from skills.manage import (
    Scope,
    SkillManageArgs,
    check_description,
    check_name,
    create_skill,
    delete_skill,
    scope_source,
    update_skill,
)
from skills.model import SKILL_FILE, Skill, SkillSource
from skills.state import StateFileError, update_disabled

__all__ = ["SkillRuntime"]

log = structlog.get_logger(__name__)

_MAX_FILES = 100
_MAX_ENTRIES = 5_000  # directory entries looked at to find them
SCAN_TIMEOUT_SECS = 2.0
T = TypeVar("T")


def _other_files(folder: Path) -> list[Path]:
    """Regular files of the skill's folder (links and hidden names left out),
    walked by fd from `/` without following a link."""
    found: list[Path] = []
    seen = 0
    try:
        dir_fd = open_dir(folder)
    except OSError:  # gone, or a link now: the body says what it can
        return found
    try:
        for top, dirs, files, top_fd in os.fwalk(".", dir_fd=dir_fd):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            seen += len(dirs) + len(files)
            for name in sorted(files):
                if name.startswith(".") or (top == "." and name == SKILL_FILE):
                    continue
                if not stat.S_ISREG(os.stat(name, dir_fd=top_fd, follow_symlinks=False).st_mode):
                    continue
                found.append(Path(os.path.normpath(folder / top / name)))
                if len(found) >= _MAX_FILES:
                    return found
            if seen >= _MAX_ENTRIES:
                break
    finally:
        os.close(dir_fd)
    return found


def _empty_scan() -> Scan:
    return Scan({}, (), frozenset(), (), (), {})


class SkillRuntime:
    def __init__(
        self,
        roots: SkillRoots,
        limits: IndexLimits,
        events: SkillEventSink | None = None,
        *,
        check_interval_secs: float = 0.0,
        scan_timeout_secs: float = SCAN_TIMEOUT_SECS,
    ) -> None:
        self.roots = roots
        self.limits = limits
        self._events = events
        self._scan: Scan | None = None
        self._lock = asyncio.Lock()
        # a turn looks at the disk at most this often; the others reuse the
        # index on the event loop (no lock, no thread hop on the hot path)
        self.check_interval_secs = check_interval_secs
        self._checked_at = -math.inf
        self.scans = 0  # full scans so far (a reload is one)
        self._index: tuple[Scan, IndexLimits, str | None] | None = None  # rendered from
        self.scan_timeout_secs = scan_timeout_secs
        self._busy: asyncio.Future[Any] | None = None  # the disk look under way

    # -- the catalogue ----------------------------------------------------------------
    async def current(self) -> Scan:
        scan = self._scan
        if scan is not None and time.monotonic() - self._checked_at < self.check_interval_secs:
            return scan
        async with self._lock:
            checked = time.monotonic()
            if self._scan is not None:
                if checked - self._checked_at < self.check_interval_secs:
                    return self._scan  # another turn looked while we waited
                now = await self._off_loop(fingerprint, self.roots)
                if now is None or now == self._scan.fingerprint:
                    self._checked_at = checked
                    return self._scan
            scan = await self._rescan()
            self._checked_at = checked
            return scan

    async def reload(self) -> Scan:
        async with self._lock:
            return await self._rescan()

    async def _off_loop(self, fn: Callable[[SkillRoots], T], roots: SkillRoots) -> T | None:
        """`fn(roots)` in a worker thread, or None when it takes longer than
        the timeout (or an earlier one is still running): the thread cannot be
        stopped, so it is left to end and no second one is started meanwhile."""
        busy = self._busy
        if busy is not None and not busy.done():
            return None
        future = asyncio.get_running_loop().run_in_executor(None, functools.partial(fn, roots))
        future.add_done_callback(_retrieve)
        self._busy = future
        done, _ = await asyncio.wait({future}, timeout=self.scan_timeout_secs)
        if not done:
            log.warning(
                "skills_scan_slow",
                timeout_secs=self.scan_timeout_secs,
                roots=[str(path) for _, path in self.roots.dirs],
            )
            return None
        return future.result()

    async def _rescan(self) -> Scan:
        old = self._scan
        new = await self._off_loop(scan, self.roots)
        if new is None:  # slow: keep the last good scan (none yet: no skills)
            if old is None:
                self._scan = old = _empty_scan()
            return old
        self.scans += 1
        self._scan = new
        events: list[SkillEvent] = []
        seen_bad = {(i.path, old.stamps.get(i.path)) for i in old.invalid} if old else set()
        for bad in new.invalid:
            if (bad.path, new.stamps.get(bad.path)) not in seen_bad:
                log.warning("skill_invalid", path=str(bad.path), reason=bad.reason)
                events.append(
                    SkillEvent(
                        SkillEventKind.INVALID,
                        bad.path.parent.name,
                        bad.source.value,
                        str(bad.path),
                        detail=bad.reason,
                    )
                )
        seen_lenient = {(i.path, old.stamps.get(i.path)) for i in old.lenient} if old else set()
        for forgiven in new.lenient:
            if (forgiven.path, new.stamps.get(forgiven.path)) not in seen_lenient:
                log.warning(
                    "skill_loaded_leniently", path=str(forgiven.path), reason=forgiven.reason
                )
        for skill in new.skills.values():
            if old is None or old.stamps.get(skill.path) != new.stamps[skill.path]:
                events.append(
                    SkillEvent(
                        SkillEventKind.DISCOVERED, skill.name, skill.source.value, str(skill.path)
                    )
                )
        for problem in new.problems:
            if old is None or problem not in old.problems:
                log.warning("skill_state_unreadable", problem=problem)
        for refused in new.refused:
            if old is None or refused not in old.refused:
                log.warning("skill_root_refused", problem=refused)
        log.debug("skills_scanned", skills=len(new.skills), invalid=len(new.invalid))
        await self._record(events)
        return new

    async def _record(self, events: Sequence[SkillEvent]) -> None:
        if self._events is not None and events:
            await self._events.record(events)

    async def skills(self) -> list[Skill]:
        return list((await self.current()).skills.values())

    async def index_text(self) -> str | None:
        """The index, rendered once per scan (every turn sends it)."""
        scan = await self.current()
        index = self._index
        if index is None or index[0] is not scan or index[1] != self.limits:
            index = self._index = (
                scan,
                self.limits,
                render_index(list(scan.skills.values()), self.limits),
            )
        return index[2]

    async def find(self, name: str) -> Skill:
        skill = (await self.current()).skills.get(name)
        if skill is None:
            raise ToolError(f"no skill named {name!r} (skill_manage list shows the skills)")
        return skill

    # -- SkillService -----------------------------------------------------------------
    async def activate(self, name: str, ctx: ToolContext) -> str:
        skill = await self.find(name)
        files = await asyncio.to_thread(_other_files, skill.folder)
        await self._record([_event(SkillEventKind.ACTIVATED, skill, ctx)])
        # skill.folder is fixed and walked without links (skills/roots.py): lexical is enough
        inside = skill.folder.is_relative_to(ctx.workspace.resolve())
        access = "" if skill.writable and inside else " (read-only)"
        lines = [f"Skill `{skill.name}` ({skill.source.value})", f"Folder: {skill.folder}{access}"]
        if files:
            lines.append("Other files in it (read them with `read` when the skill says so):")
            lines += [f"- {f}" for f in files]
        return "\n".join([*lines, "", skill.body])

    async def manage(self, request: ToolArgs, ctx: ToolContext) -> str:
        if not isinstance(request, SkillManageArgs):
            raise ToolError("skill_manage: unexpected arguments")
        r = request
        match r.action:
            case "list":
                return await self._list()
            case "get":
                skill = await self.find(check_name_given(r.name))
                meta = ", ".join(f"{k}: {v}" for k, v in skill.metadata.items())
                return f"{skill.path} ({skill.source.value})\n{meta}\n\n{skill.body}"
            case "create":
                name = check_name(r.name)
                source = scope_source(r.scope)
                path = await asyncio.to_thread(
                    create_skill,
                    self.roots,
                    source,
                    name,
                    check_description(r.description),
                    r.body or "",
                )
                return await self._changed(SkillEventKind.CREATED, name, source, path, ctx)
            case "update":
                skill = await self.find(check_name_given(r.name))
                path = await asyncio.to_thread(update_skill, skill, r.description, r.body)
                return await self._changed(
                    SkillEventKind.UPDATED, skill.name, skill.source, path, ctx
                )
            case "delete":
                skill = await self.find(check_name_given(r.name))
                path = await asyncio.to_thread(delete_skill, skill)
                return await self._changed(
                    SkillEventKind.DELETED, skill.name, skill.source, path, ctx
                )
            case "disable" | "enable":
                return await self._switch(r, ctx)
            case "reload":
                fresh = await self.reload()
                return f"Reloaded: {len(fresh.skills)} skill(s), {len(fresh.invalid)} invalid."
        raise ToolError(f"unknown action {r.action!r}")  # pragma: no cover - Literal

    async def _list(self) -> str:
        current = await self.current()
        if not current.skills:
            lines = ["No skills."]
        else:
            lines = [
                f"- {s.name} ({s.source.value}): {s.description}" for s in current.skills.values()
            ]
        if current.disabled:
            lines.append("Disabled: " + ", ".join(sorted(current.disabled)))
        return "\n".join(lines)

    async def _changed(
        self, kind: SkillEventKind, name: str, source: SkillSource, path: Path, ctx: ToolContext
    ) -> str:
        await self._record([_event(kind, None, ctx, name=name, source=source, path=path)])
        await self.reload()  # the next turn's index shows the change
        return f"Skill {name!r} {kind.value} ({source.value}: {path})."

    async def _switch(self, r: SkillManageArgs, ctx: ToolContext) -> str:
        if not r.names:
            raise ToolError(f"{r.action} needs 'names': an array of skill names")
        scope: Scope = "user" if r.scope == "user" else "project"
        paths, unknown = await self.switch(
            r.names, enable=r.action == "enable", scopes=[scope], ctx=ctx
        )
        note = f" Not found now (kept in the file): {', '.join(unknown)}." if unknown else ""
        count = len(dict.fromkeys(r.names))
        return f"{r.action.capitalize()}d {count} skill(s) in {paths[0]}.{note}"

    async def switch(
        self,
        names: Sequence[str],
        *,
        enable: bool,
        scopes: Sequence[Scope],
        ctx: ToolContext | None = None,
        detail: str | None = None,
    ) -> tuple[list[Path], list[str]]:
        """Disable `names` (add them to the state file of each of `scopes`:
        "user" is $PICOBOT_HOME's, "project" the project's) or enable them
        (take them out of those files); then reload once and record one event
        per name, with `ctx`'s session and chat (the tool) or `detail` (the
        console, the CLI). Returns the files written and the names found in no
        source now (kept in the file all the same). A state file that is not
        the JSON it should be raises ToolError naming it."""
        names = list(dict.fromkeys(names))
        paths = [self.roots.user_state if s == "user" else self.roots.project_state for s in scopes]
        add, remove = ([], names) if enable else (names, [])
        before = await self.current()
        known = {*before.skills, *before.disabled}
        try:
            for path in dict.fromkeys(paths):
                await asyncio.to_thread(update_disabled, path, add, remove)
        except StateFileError as exc:
            raise ToolError(str(exc)) from None
        await self.reload()  # once for the whole batch
        kind = SkillEventKind.ENABLED if enable else SkillEventKind.DISABLED
        where = paths[0] if len(paths) == 1 else None
        await self._record(
            [_event(kind, None, ctx, name=n, path=where, detail=detail) for n in names]
        )
        return paths, [n for n in names if n not in known]


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Marks a dropped look's error as seen (it was logged, or is moot)."""
    if not future.cancelled():
        future.exception()


def check_name_given(name: str | None) -> str:
    if not name:
        raise ToolError("this action needs the skill's 'name'")
    return name


def _event(
    kind: SkillEventKind,
    skill: Skill | None,
    ctx: ToolContext | None,
    *,
    name: str | None = None,
    source: SkillSource | None = None,
    path: Path | None = None,
    detail: str | None = None,
) -> SkillEvent:
    src = source or (skill.source if skill else None)
    where = path or (skill.path if skill else None)
    return SkillEvent(
        kind,
        name or (skill.name if skill else ""),
        src.value if src else None,
        str(where) if where else None,
        ctx.session_id if ctx else None,
        ctx.channel if ctx else None,
        ctx.chat_id if ctx else None,
        detail,
    )
