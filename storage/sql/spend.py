"""What the models cost, kept for budgets and reports (docs/limits.md#budgets).

- `spend_totals`: running totals of tokens and cost per (scope, key, period),
  e.g. ("sender", "telegram:42", "day:2026-12-07"); a budget is checked
  against a handful of these rows, never by summing the log.
- `usage_log`: one row per model call (who caused it, agent, model, the
  four token counts, the cost), for `/usage`, `picobot usage`, the
  console's usage view (`usage_by`) and reports;
  pruned after `limits.usage_retention_days`.
- `limit_overrides`: budgets set at run time (`/limits`, `picobot limits`),
  one row per (scope, key, field); a NULL value means "no limit".

`charge` adds one call to every total it counts under and logs it, in one
transaction, and returns each total's amount before and after: the caller
sees exactly once that a total crossed a line, however many turns charge at
the same moment.
"""

from __future__ import annotations

import asyncio
import functools
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from storage.clock import iso
from storage.database import Database

__all__ = [
    "USAGE_DIMENSIONS",
    "Call",
    "Override",
    "SpendStore",
    "Total",
    "TotalKey",
    "UsageDay",
    "UsageGroup",
    "charge",
    "clear_override",
    "overrides",
    "prune",
    "rebuild_totals",
    "run_tokens",
    "set_override",
    "spent",
    "totalled_keys",
    "totals",
    "usage_by",
    "usage_days",
]

TotalKey = tuple[str, str, str]  # (scope, key, period)


@dataclass(frozen=True, slots=True)
class Total:
    tokens: int = 0
    cost: float = 0.0


@dataclass(frozen=True, slots=True)
class Call:
    """One model call and whom it is charged to."""

    channel: str
    chat_id: str
    sender_id: str
    agent: str
    model: str
    kind: str  # turn | compaction | memory
    run_id: str | None
    day: str  # the local date, "2026-12-07" (time.timezone)
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost: float | None  # None: the model has no prices

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True, slots=True)
class Override:
    scope: str
    key: str
    field: str
    value: float | None
    set_by: str
    set_at: str


@dataclass(frozen=True, slots=True)
class UsageDay:
    """A report row: one day's calls of one agent and model."""

    day: str
    agent: str
    model: str
    calls: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost: float


@dataclass(frozen=True, slots=True)
class UsageGroup:
    """A report row: one day's calls of one agent, model, channel or user
    (`key`; "" for each of the day's calls, or not known)."""

    day: str
    key: str
    calls: int
    turns: int  # distinct run ids (a call outside a turn has none)
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost: float


# what a report groups the log by, after the day: a user is "channel:sender_id"
USAGE_DIMENSIONS: dict[str, str | None] = {
    "day": None,
    "agent": "agent",
    "model": "model",
    "channel": "channel",
    "user": "CASE WHEN sender_id = '' THEN '' ELSE channel || ':' || sender_id END",
}
# a report row's numbers: calls, the four token counts, the cost
_SUMS = (
    "COUNT(*), SUM(input_tokens), SUM(output_tokens), SUM(cache_read_tokens), "
    "SUM(cache_write_tokens), COALESCE(SUM(cost), 0)"
)


def charge(
    conn: sqlite3.Connection, call: Call, keys: Sequence[TotalKey], now: datetime
) -> dict[TotalKey, tuple[Total, Total]]:
    """Log `call` and add it to the total of each of `keys`: each total before and after."""
    at = iso(now)
    conn.execute(
        "INSERT INTO usage_log (at, day, channel, chat_id, sender_id, agent, model, kind, "
        "run_id, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            at, call.day, call.channel, call.chat_id, call.sender_id, call.agent, call.model,
            call.kind, call.run_id, call.input_tokens, call.output_tokens,
            call.cache_read_tokens, call.cache_write_tokens, call.cost,
        ),
    )  # fmt: skip
    tokens, cost = call.tokens, call.cost or 0.0
    if not keys:  # no scope keeps totals: the log alone
        return {}
    # the totals before, read in this transaction (one gateway writes a database,
    # through one connection: nothing charges in between), then all added in one
    # statement; after = before + the call, as the database adds it (IEEE doubles
    # both), so a line is seen crossed exactly once
    match = " OR ".join("(scope = ? AND key = ? AND period = ?)" for _ in keys)
    found = conn.execute(
        f"SELECT scope, key, period, tokens, cost FROM spend_totals WHERE {match}",
        [part for key in keys for part in key],
    ).fetchall()
    before = {(r[0], r[1], r[2]): Total(int(r[3]), float(r[4])) for r in found}
    rows = ", ".join("(?, ?, ?, ?, ?, ?)" for _ in keys)
    conn.execute(
        "INSERT INTO spend_totals (scope, key, period, tokens, cost, updated_at) "
        f"VALUES {rows} ON CONFLICT (scope, key, period) DO UPDATE SET "
        "tokens = spend_totals.tokens + excluded.tokens, "
        "cost = spend_totals.cost + excluded.cost, updated_at = excluded.updated_at",
        [value for key in keys for value in (*key, tokens, cost, at)],
    )
    out: dict[TotalKey, tuple[Total, Total]] = {}
    for key in keys:
        was = before.get(key, Total())
        out[key] = (was, Total(was.tokens + tokens, was.cost + cost))
    return out


def totals(conn: sqlite3.Connection, keys: Sequence[TotalKey]) -> dict[TotalKey, Total]:
    """The totals of `keys` (a key never charged: zero)."""
    found = {key: Total() for key in keys}
    for key in keys:
        row = conn.execute(
            "SELECT tokens, cost FROM spend_totals WHERE scope = ? AND key = ? AND period = ?",
            key,
        ).fetchone()
        if row is not None:
            found[key] = Total(int(row[0]), float(row[1]))
    return found


def overrides(
    conn: sqlite3.Connection, pairs: Sequence[tuple[str, str]] | None = None
) -> list[Override]:
    """The budgets set at run time: all, or those of the (scope, key) `pairs`."""
    sql = "SELECT scope, key, field, value, set_by, set_at FROM limit_overrides"
    if pairs is None:
        rows = conn.execute(f"{sql} ORDER BY scope, key, field").fetchall()
    else:
        rows = [
            row
            for scope, key in pairs
            for row in conn.execute(f"{sql} WHERE scope = ? AND key = ?", (scope, key))
        ]
    return [_override(r) for r in rows]


def _override(r: Any) -> Override:
    return Override(r[0], r[1], r[2], None if r[3] is None else float(r[3]), r[4], r[5])


def set_override(
    conn: sqlite3.Connection,
    scope: str,
    key: str,
    field: str,
    value: float | None,
    set_by: str,
    now: datetime,
) -> None:
    conn.execute(
        "INSERT INTO limit_overrides (scope, key, field, value, set_by, set_at) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (scope, key, field) DO UPDATE SET "
        "value = excluded.value, set_by = excluded.set_by, set_at = excluded.set_at",
        (scope, key, field, value, set_by, iso(now)),
    )


def clear_override(conn: sqlite3.Connection, scope: str, key: str, field: str | None) -> int:
    """Drop one field's override (`field` None: all of that scope and key); how many went."""
    if field is None:
        cursor = conn.execute(
            "DELETE FROM limit_overrides WHERE scope = ? AND key = ?", (scope, key)
        )
    else:
        cursor = conn.execute(
            "DELETE FROM limit_overrides WHERE scope = ? AND key = ? AND field = ?",
            (scope, key, field),
        )
    return int(cursor.rowcount)


def usage_days(
    conn: sqlite3.Connection,
    since_day: str,
    *,
    channel: str | None = None,
    sender_id: str | None = None,
) -> list[UsageDay]:
    """The log from `since_day` (local dates) by day, agent and model; one sender's if given."""
    where, args = "day >= ?", [since_day]
    if channel is not None and sender_id is not None:
        where += " AND channel = ? AND sender_id = ?"
        args += [channel, sender_id]
    rows = conn.execute(
        f"SELECT day, agent, model, {_SUMS} "
        f"FROM usage_log WHERE {where} GROUP BY day, agent, model ORDER BY day, agent, model",
        args,
    ).fetchall()
    return [
        UsageDay(
            r[0], r[1], r[2], int(r[3]), int(r[4]), int(r[5]), int(r[6]), int(r[7]), float(r[8])
        )
        for r in rows
    ]


def usage_by(
    conn: sqlite3.Connection, dimension: str, first_day: str, last_day: str, top: int
) -> list[UsageGroup]:
    """The log from `first_day` to `last_day` (local dates) by day and
    `dimension` (a key of USAGE_DIMENSIONS; "day": by day alone), of the `top`
    keys with the most tokens over those days."""
    expr = USAGE_DIMENSIONS[dimension]
    span = "day >= ? AND day <= ?"
    args: list[str | int] = [first_day, last_day]
    if expr is None:
        key, group, where = "''", "day", span
    else:
        key, group = expr, f"day, {expr}"
        where = (
            f"{span} AND {expr} IN (SELECT {expr} FROM usage_log WHERE {span} GROUP BY {expr} "
            f"ORDER BY SUM(input_tokens + output_tokens) DESC, {expr} LIMIT ?)"
        )
        args += [first_day, last_day, top]
    rows = conn.execute(
        f"SELECT day, {key}, {_SUMS}, COUNT(DISTINCT run_id) FROM usage_log "
        f"WHERE {where} GROUP BY {group} ORDER BY {group}",
        args,
    ).fetchall()
    return [_group(r) for r in rows]


def _group(r: Any) -> UsageGroup:
    """A `usage_by` row: day, key, the numbers of _SUMS, the turns."""
    calls, read, write, turns = int(r[2]), int(r[5]), int(r[6]), int(r[8])
    return UsageGroup(r[0], r[1], calls, turns, int(r[3]), int(r[4]), read, write, float(r[7]))


def totalled_keys(
    conn: sqlite3.Connection, scope: str, periods: Sequence[str], limit: int
) -> list[str]:
    """The keys of `scope` with a total in any of `periods` ("day:…",
    "month:…"), those that spent the most first, `limit` at most."""
    marks = ", ".join("?" for _ in periods)
    rows = conn.execute(
        f"SELECT key FROM spend_totals WHERE scope = ? AND period IN ({marks}) "
        "GROUP BY key ORDER BY MAX(cost) DESC, MAX(tokens) DESC, key LIMIT ?",
        (scope, *periods, limit),
    ).fetchall()
    return [str(r[0]) for r in rows]


# the key of each scope in a usage_log row (gateway/spend/budget.py scope_key)
_SCOPE_KEY = {
    "sender": "channel || ':' || sender_id",
    "chat": "channel || ':' || chat_id",
    "agent": "agent",
    "total": "'*'",
}
_KNOWN = {"sender": "sender_id != ''", "chat": "chat_id != ''", "agent": "agent != ''"}


def rebuild_totals(
    conn: sqlite3.Connection,
    scopes: Sequence[str],
    periods: Sequence[tuple[str, str, str]],
    now: datetime,
) -> None:
    """Totals of `scopes` for `periods` ((period key, first day, last day),
    local dates) summed afresh from the log: for a scope that had no budget
    until now, whose calls were logged but not totalled."""
    at = iso(now)
    for scope in scopes:
        key = _SCOPE_KEY[scope]
        known = _KNOWN.get(scope, "1 = 1")
        # the total is one row (zero without calls): PostgreSQL groups by no constant
        group = "" if scope == "total" else f" GROUP BY {key}"
        for period, first, last in periods:
            conn.execute("DELETE FROM spend_totals WHERE scope = ? AND period = ?", (scope, period))
            conn.execute(
                "INSERT INTO spend_totals (scope, key, period, tokens, cost, updated_at) "
                f"SELECT ?, {key}, ?, COALESCE(SUM(input_tokens + output_tokens), 0), "
                f"COALESCE(SUM(cost), 0), ? FROM usage_log WHERE day >= ? AND day <= ? "
                f"AND {known}{group}",
                (scope, period, at, first, last),
            )


def spent(
    conn: sqlite3.Connection, where: str, args: Sequence[str], first_day: str, day: str
) -> tuple[Total, Total]:
    """(today, this month) of the log rows matching `where` (a fixed condition
    of this module's callers), from the log itself: for `/usage`, whether or
    not the scope has a budget."""
    row = conn.execute(
        "SELECT COALESCE(SUM(CASE WHEN day = ? THEN input_tokens + output_tokens END), 0), "
        "COALESCE(SUM(CASE WHEN day = ? THEN cost END), 0), "
        "COALESCE(SUM(input_tokens + output_tokens), 0), COALESCE(SUM(cost), 0) "
        f"FROM usage_log WHERE day >= ? AND day <= ? AND {where}",
        (day, day, first_day, day, *args),
    ).fetchone()
    return Total(int(row[0]), float(row[1])), Total(int(row[2]), float(row[3]))


def run_tokens(conn: sqlite3.Connection, run_id: str) -> tuple[int, int] | None:
    """(input, output) tokens of the model calls of one turn; None: none logged."""
    row = conn.execute(
        "SELECT COUNT(*), COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0) "
        "FROM usage_log WHERE run_id = ?",
        (run_id,),
    ).fetchone()
    return (int(row[1]), int(row[2])) if row[0] else None


def prune(
    conn: sqlite3.Connection, log_before: datetime, totals_before: datetime, batch: int
) -> int:
    """Drop log rows older than `log_before` among the `batch` oldest, and the
    totals last charged before `totals_before` (their period is long over);
    how many rows went. Run it again while it returns `batch` or more. Rows
    are written in time order, so the oldest by id are the oldest by time: no
    index on the time (one less to update per model call), and a pass reads
    `batch` rows, not the table."""
    gone = conn.execute(
        "DELETE FROM usage_log WHERE id IN (SELECT id FROM "
        "(SELECT id, at FROM usage_log ORDER BY id LIMIT ?) AS oldest WHERE at < ?)",
        (batch, iso(log_before)),
    ).rowcount
    gone += conn.execute(
        "DELETE FROM spend_totals WHERE updated_at < ?", (iso(totals_before),)
    ).rowcount
    return int(gone)


class SpendStore:
    """The functions above as units of work (`Store.spend`), one transaction each."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def charge(
        self, call: Call, keys: Sequence[TotalKey], now: datetime
    ) -> dict[TotalKey, tuple[Total, Total]]:
        return await self.db.write(functools.partial(charge, call=call, keys=keys, now=now))

    def charge_soon(
        self, call: Call, keys: Sequence[TotalKey], now: datetime
    ) -> asyncio.Future[dict[TotalKey, tuple[Total, Total]]] | None:
        """`charge` queued for the next group commit, not waited for; None when
        the write queue is full (then await `charge`)."""
        return self.db.submit(functools.partial(charge, call=call, keys=keys, now=now))

    async def totals(self, keys: Sequence[TotalKey]) -> dict[TotalKey, Total]:
        return await self.db.read(functools.partial(totals, keys=keys))

    async def overrides(self, pairs: Sequence[tuple[str, str]] | None = None) -> list[Override]:
        return await self.db.read(functools.partial(overrides, pairs=pairs))

    async def set_override(
        self, scope: str, key: str, field: str, value: float | None, set_by: str, now: datetime
    ) -> None:
        await self.db.write(
            functools.partial(
                set_override, scope=scope, key=key, field=field, value=value, set_by=set_by, now=now
            )
        )

    async def clear_override(self, scope: str, key: str, field: str | None) -> int:
        return await self.db.write(
            functools.partial(clear_override, scope=scope, key=key, field=field)
        )

    async def usage_days(
        self, since_day: str, *, channel: str | None = None, sender_id: str | None = None
    ) -> list[UsageDay]:
        return await self.db.read(
            functools.partial(usage_days, since_day=since_day, channel=channel, sender_id=sender_id)
        )

    async def usage_by(
        self, dimension: str, first_day: str, last_day: str, top: int
    ) -> list[UsageGroup]:
        return await self.db.read(
            functools.partial(
                usage_by, dimension=dimension, first_day=first_day, last_day=last_day, top=top
            )
        )

    async def totalled_keys(self, scope: str, periods: Sequence[str], limit: int) -> list[str]:
        return await self.db.read(
            functools.partial(totalled_keys, scope=scope, periods=periods, limit=limit)
        )

    async def rebuild_totals(
        self, scopes: Sequence[str], periods: Sequence[tuple[str, str, str]], now: datetime
    ) -> None:
        await self.db.write(
            functools.partial(rebuild_totals, scopes=scopes, periods=periods, now=now)
        )

    async def sender_spent(
        self, channel: str, sender_id: str, first_day: str, day: str
    ) -> tuple[Total, Total]:
        where, args = "channel = ? AND sender_id = ?", (channel, sender_id)
        return await self.db.read(
            functools.partial(spent, where=where, args=args, first_day=first_day, day=day)
        )

    async def chat_spent(
        self, channel: str, chat_id: str, first_day: str, day: str
    ) -> tuple[Total, Total]:
        where, args = "channel = ? AND chat_id = ?", (channel, chat_id)
        return await self.db.read(
            functools.partial(spent, where=where, args=args, first_day=first_day, day=day)
        )

    async def run_tokens(self, run_id: str) -> tuple[int, int] | None:
        return await self.db.read(functools.partial(run_tokens, run_id=run_id))

    async def prune(self, log_before: datetime, totals_before: datetime, batch: int) -> int:
        return await self.db.write(
            functools.partial(
                prune, log_before=log_before, totals_before=totals_before, batch=batch
            )
        )
