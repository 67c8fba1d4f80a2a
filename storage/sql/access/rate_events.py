"""Rate events: one row per counted act (a session message sent, a refusal
reply) under a kind and a key, so that a limit holds across sessions,
sub-agents and restarts instead of living in one process's memory.

`take` checks and records in the caller's transaction: inside a unit of work
(e.g. with the send it counts, storage/sql/conversations/sent_messages.py) two concurrent
turns cannot both pass the check. It prunes its kind's rows that have left the
window as it goes, so the table holds at most one window of events per kind.
`RateStore` is the same as standalone units of work (`Store.rates`).
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from storage.clock import iso, parse_iso
from storage.database import Database

__all__ = ["RateLimit", "RateStore", "give_back", "take", "take_each"]


@dataclass(frozen=True, slots=True)
class RateLimit:
    """At most `count` events of `kind` per key in any `window`."""

    kind: str
    count: int
    window: timedelta


def take(
    conn: sqlite3.Connection, limit: RateLimit, keys: Sequence[str], now: datetime
) -> float | None:
    """Record one event at `now` under every key, or none at all: None when
    each key had fewer than `limit.count` events in the window before `now`;
    else the seconds until the fullest key has room again."""
    since = iso(now - limit.window)
    conn.execute("DELETE FROM rate_events WHERE kind = ? AND at <= ?", (limit.kind, since))
    wait = 0.0
    for key in keys:
        # the count-th newest event: while it is in the window, the key is full
        row = conn.execute(
            "SELECT at FROM rate_events WHERE kind = ? AND key = ? "
            "ORDER BY at DESC LIMIT 1 OFFSET ?",
            (limit.kind, key, limit.count - 1),
        ).fetchone()
        if row is not None:
            frees = parse_iso(row["at"]) + limit.window - now
            wait = max(wait, frees.total_seconds(), 0.001)
    if wait > 0:
        return wait
    at = iso(now)
    conn.executemany(
        "INSERT INTO rate_events (kind, key, at) VALUES (?, ?, ?)",
        [(limit.kind, key, at) for key in keys],
    )
    return None


def give_back(
    conn: sqlite3.Connection, limit: RateLimit, keys: Sequence[str], now: datetime
) -> None:
    """Undo a `take` at `now` whose act did not happen after all."""
    at = iso(now)
    for key in keys:
        conn.execute(
            "DELETE FROM rate_events WHERE id = (SELECT id FROM rate_events "
            "WHERE kind = ? AND key = ? AND at = ? LIMIT 1)",
            (limit.kind, key, at),
        )


def take_each(
    conn: sqlite3.Connection, limits: Sequence[RateLimit], keys: Sequence[str], now: datetime
) -> tuple[RateLimit, float] | None:
    """`take` under every limit (a minute's and an hour's), all or none: the
    first limit that is full and its wait, the events already taken given back."""
    taken: list[RateLimit] = []
    for limit in limits:
        wait = take(conn, limit, keys, now)
        if wait is not None:
            for done in taken:
                give_back(conn, done, keys, now)
            return limit, wait
        taken.append(limit)
    return None


class RateStore:
    """`take` and `give_back` as units of work of their own (one transaction each)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def take(self, limit: RateLimit, keys: Sequence[str], now: datetime) -> float | None:
        return await self.db.write(functools.partial(take, limit=limit, keys=keys, now=now))

    async def take_each(
        self, limits: Sequence[RateLimit], keys: Sequence[str], now: datetime
    ) -> tuple[RateLimit, float] | None:
        return await self.db.write(functools.partial(take_each, limits=limits, keys=keys, now=now))

    async def give_back(self, limit: RateLimit, keys: Sequence[str], now: datetime) -> None:
        await self.db.write(functools.partial(give_back, limit=limit, keys=keys, now=now))
