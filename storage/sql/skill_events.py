"""Skill discovery and usage events, one append-only table (migration 7).

What happened to which skill (discovered, invalid, activated, created, updated,
deleted, disabled, enabled), where it came from, and for an event a tool
caused, the session and chat it happened in. Synchronous functions of a
`sqlite3.Connection` for `Database.read`/`write`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from storage.clock import now_iso, parse_iso

__all__ = ["SkillEventRow", "list_events", "record"]


@dataclass(frozen=True, slots=True)
class SkillEventRow:
    event: str
    skill: str
    source: str | None = None
    path: str | None = None
    session_id: str | None = None
    channel: str | None = None
    chat_id: str | None = None
    detail: str | None = None
    created_at: datetime | None = None  # set when read back
    id: int | None = None


_COLUMNS = "event, skill, source, path, session_id, channel, chat_id, detail"


def record(conn: sqlite3.Connection, *, rows: Sequence[SkillEventRow]) -> None:
    stamp = now_iso()
    conn.executemany(
        f"INSERT INTO skill_events ({_COLUMNS}, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                r.event,
                r.skill,
                r.source,
                r.path,
                r.session_id,
                r.channel,
                r.chat_id,
                r.detail,
                stamp,
            )
            for r in rows
        ],
    )


def list_events(conn: sqlite3.Connection, *, skill: str | None, limit: int) -> list[SkillEventRow]:
    """The latest `limit` events (of `skill`, if given), oldest first."""
    where, params = ("WHERE skill = ?", [skill]) if skill else ("", [])
    cur = conn.execute(
        f"SELECT id, {_COLUMNS}, created_at FROM skill_events {where} ORDER BY id DESC LIMIT ?",
        [*params, limit],
    )
    out = [
        SkillEventRow(
            r["event"],
            r["skill"],
            r["source"],
            r["path"],
            r["session_id"],
            r["channel"],
            r["chat_id"],
            r["detail"],
            created_at=parse_iso(r["created_at"]),
            id=r["id"],
        )
        for r in cur.fetchall()
    ]
    return out[::-1]
