"""Retention: deleting rows a long-running gateway no longer needs, in small batches.

Synchronous functions of a `sqlite3.Connection` for `Database.write`/`read`;
each deletes at most `limit` rows, so a backlog never holds the writer long.
Past the cutoff these go (`RetainedTable`):

- outbox rows delivered (`sent`, by `sent_at`) or discarded by an operator
  (by `created_at`); a row given up (`failed`) stays until it is retried or
  discarded;
- inbox rows `done` (by `finished_at`): a platform redelivering an event older
  than that would be answered again, and platforms redeliver within hours;
- dead letters, skill events, and approvals `done` (by `updated_at`).

Never touched: pending or parked outbox rows, unfinished inbox rows, open
approvals, sessions, messages, memories, scheduler jobs (their runs are capped
per job by storage.sql.jobs). The newest row of a table always stays: SQLite gives
a new row max(id) + 1, and an id must never name two rows (Telegram keeps a
reply's progress under its outbox id).

Channel state written for one outbox row (`row_of_state_key`) goes as soon as
that row is delivered or gone; a given-up row keeps it for a retry.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Final, Generic, TypeVar

from storage.clock import iso

__all__ = [
    "YOUNG_RUN",
    "Pruned",
    "RetainedTable",
    "RowRef",
    "outbox_states",
    "prune_batch",
    "prune_row_state_batch",
    "row_of_state_key",
    "undelivered_outbox_media",
    "unfinished_media",
]


T = TypeVar("T")


class RetainedTable(StrEnum):
    OUTBOX = "outbox"
    INBOX = "inbox"
    DEAD_LETTERS = "dead_letters"
    APPROVALS = "approvals"
    SKILL_EVENTS = "skill_events"


@dataclass(frozen=True, slots=True)
class _Rule:
    born: str  # when the row was written: grows with its id
    expired: str  # SQL: the row is finished and was last needed before :cutoff


_BEFORE = "julianday({}) < julianday(:cutoff)"
YOUNG_RUN: Final = 50
_RULES: Final = {
    RetainedTable.OUTBOX: _Rule(
        "created_at",
        # a given-up row stays until someone retries or discards it: the table
        # has no time it failed at, and a reply given up must never vanish
        # unseen (§4.6); a discarded one was seen
        f"(state = 'sent' AND {_BEFORE.format('sent_at')}) OR state = 'discarded'",
    ),
    RetainedTable.INBOX: _Rule(
        "received_at", f"state = 'done' AND {_BEFORE.format('finished_at')}"
    ),
    RetainedTable.DEAD_LETTERS: _Rule("created_at", _BEFORE.format("created_at")),
    RetainedTable.APPROVALS: _Rule(
        "created_at", f"state = 'done' AND {_BEFORE.format('updated_at')}"
    ),
    RetainedTable.SKILL_EVENTS: _Rule("created_at", _BEFORE.format("created_at")),
}


@dataclass(frozen=True, slots=True)
class Pruned(Generic[T]):
    deleted: int
    resume_after: T | None  # where the next batch starts; None: nothing left to look at


def prune_batch(
    conn: sqlite3.Connection, table: RetainedTable, cutoff: datetime, after: int, limit: int
) -> Pruned[int]:
    """Delete up to `limit` expired rows of `table` with ids above `after`.

    Rows are walked in id order, which is the order they were written: the
    walk ends once `YOUNG_RUN` rows in a row were written after the cutoff,
    so a pass reads only the old rows (and the few old ones still open)
    instead of the table, and one row stamped ahead (a clock set wrong for a
    while) does not end every pass before the old rows behind it."""
    rule = _RULES[table]
    rows = conn.execute(
        f"SELECT id, ({rule.expired}) AS expired, {_BEFORE.format(rule.born)} AS old "
        f"FROM {table} WHERE id > :after AND id < (SELECT MAX(id) FROM {table}) "
        "ORDER BY id LIMIT :limit",
        {"cutoff": iso(cutoff), "after": after, "limit": limit},
    ).fetchall()
    doomed: list[int] = []
    resume: int | None = rows[-1]["id"] if len(rows) == limit else None
    young = 0  # rows in a row written after the cutoff
    for r in rows:
        if not r["old"]:
            young += 1
            if young >= YOUNG_RUN:
                resume = None
                break
            continue
        young = 0
        if r["expired"]:
            doomed.append(r["id"])
    conn.executemany(f"DELETE FROM {table} WHERE id = ?", [(i,) for i in doomed])
    return Pruned(len(doomed), resume)


# -- channel state of one outbox row ------------------------------------------------

_ROW_KEY_PREFIXES: Final = ("progress:", "streamed:", "upload:")
_IDEMPOTENCY_KEY: Final = re.compile(r"[0-9a-f]{32}")


@dataclass(frozen=True, slots=True)
class RowRef:
    """The outbox row a channel-state key belongs to: by id or by idempotency key."""

    outbox_id: int | None = None
    idempotency_key: str | None = None


def row_of_state_key(key: str) -> RowRef | None:
    """The outbox row `key` was written for, or None for the channel's own
    state (cursors, tokens, chat migrations). The forms channels write:
    Telegram `progress:<outbox id>` (parts already delivered); Feishu
    `upload:<idempotency key>:<part>` and `streamed:<idempotency key>`;
    WeChat `upload:picobot-<idempotency key>-<part>`."""
    prefix = next((p for p in _ROW_KEY_PREFIXES if key.startswith(p)), None)
    if prefix is None:
        return None
    rest = key[len(prefix) :]
    if prefix == "progress:":
        return RowRef(outbox_id=int(rest)) if rest.isdigit() else None
    found = _IDEMPOTENCY_KEY.search(rest)
    return RowRef(idempotency_key=found.group()) if found else None


_OPEN: Final = frozenset({"pending", "parked", "failed"})  # a failed row may be retried


def prune_row_state_batch(
    conn: sqlite3.Connection, after: tuple[str, str], limit: int
) -> Pruned[tuple[str, str]]:
    """Delete the channel state of outbox rows delivered or gone, among up to
    `limit` row-scoped keys after `after` (channel, key). A key's row is
    always committed before a channel writes it, so a missing row is one
    already pruned."""
    rows = conn.execute(
        "SELECT channel, key FROM channel_state WHERE (key GLOB 'progress:*' OR "
        "key GLOB 'streamed:*' OR key GLOB 'upload:*') AND (channel, key) > (?, ?) "
        "ORDER BY channel, key LIMIT ?",
        (*after, limit),
    ).fetchall()
    refs = {(r["channel"], r["key"]): row_of_state_key(r["key"]) for r in rows}
    open_ids, open_keys = _open_rows(conn, [ref for ref in refs.values() if ref is not None])
    doomed = [
        slot
        for slot, ref in refs.items()
        if ref is not None
        and ref.outbox_id not in open_ids
        and ref.idempotency_key not in open_keys
    ]
    conn.executemany("DELETE FROM channel_state WHERE channel = ? AND key = ?", doomed)
    last = (rows[-1]["channel"], rows[-1]["key"]) if len(rows) == limit else None
    return Pruned(len(doomed), last)


def _open_rows(conn: sqlite3.Connection, refs: Sequence[RowRef]) -> tuple[set[int], set[str]]:
    """Of the rows `refs` name, the ids and the keys of those still open."""
    ids = sorted({r.outbox_id for r in refs if r.outbox_id is not None})
    keys = sorted({r.idempotency_key for r in refs if r.idempotency_key is not None})
    open_ids: set[int] = set()
    if ids:
        marks = ",".join("?" * len(ids))
        found = conn.execute(f"SELECT id, state FROM outbox WHERE id IN ({marks})", ids)
        open_ids = {r["id"] for r in found if r["state"] in _OPEN}
    states = outbox_states(conn, keys)
    return open_ids, {key for key, state in states.items() if state in _OPEN}


def outbox_states(conn: sqlite3.Connection, keys: Sequence[str]) -> dict[str, str]:
    """The state of each outbox row among `keys` (idempotency keys); a key
    without a row is absent."""
    if not keys:
        return {}
    marks = ",".join("?" * len(keys))
    rows = conn.execute(
        f"SELECT idempotency_key, state FROM outbox WHERE idempotency_key IN ({marks})",
        list(keys),
    ).fetchall()
    return {r["idempotency_key"]: r["state"] for r in rows}


def undelivered_outbox_media(conn: sqlite3.Connection) -> set[str]:
    """The files the outbox rows not yet delivered send. A copy is made for
    one row, but a message queued again (a new row, a new key) names the same
    file: a copy goes only once no row still to be sent names it."""
    paths: set[str] = set()
    rows = conn.execute(
        "SELECT media FROM outbox WHERE state NOT IN ('sent', 'discarded') AND media IS NOT NULL"
    )
    for (media,) in rows:
        try:
            paths.update(str(m["path"]) for m in json.loads(media))
        except (ValueError, TypeError, KeyError):
            continue  # not ours to judge here: the row fails when it is sent
    return paths


def unfinished_media(conn: sqlite3.Connection) -> set[str]:
    """The files the unfinished inbox rows carry, and the messages of turns
    paused for an approval (their inbox rows are closed): a resumed turn
    still reads them."""
    paths: set[str] = set()
    waiting = conn.execute(
        "SELECT payload FROM inbox WHERE state != 'done' "
        "UNION ALL SELECT message FROM approvals WHERE state != 'done'"
    )
    for (payload,) in waiting:
        try:
            media = json.loads(payload).get("media", [])
            paths.update(str(m["path"]) for m in media)
        except (ValueError, TypeError, KeyError, AttributeError):
            continue  # an unreadable row is set aside at start (inbox.set_aside_unreadable)
    return paths
