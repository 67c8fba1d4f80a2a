"""Several gateways on one database (docs/scale-out.md): workers and leases.

A worker is a row renewed by its heartbeat (`expires_at`). A lease is a row
(`key`, `owner`, `token`): `chat:<channel>:<chat_id>` (where a chat's turns
run) or `channel:<name>` (a channel's one connection and its sends). A lease is
valid while its owner's worker row is unexpired, so one heartbeat renews every
lease a worker holds. Taking a lease over from a dead owner raises its
`token`; every write a turn makes checks the token it started with
(`check_fence`, in the write's own transaction, the lease row held FOR SHARE
on PostgreSQL so that a takeover waits for the write or the write sees the
takeover), so a worker that lost a lease cannot commit after another took it.

Times are the database's clock (seconds since the epoch), never a worker's:
workers on several machines agree on expiry whatever their clocks say.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from storage.clock import parse_iso
from storage.errors import FenceLost
from storage.sql.dialect import is_postgres

__all__ = [
    "Heartbeat",
    "LeaseHolder",
    "WorkerForgotten",
    "WorkerRow",
    "acquire",
    "all_leases",
    "channel_key",
    "chat_key",
    "check_fence",
    "db_now",
    "expire_predecessors",
    "heartbeat",
    "holders",
    "leases_of",
    "list_workers",
    "live_worker",
    "orphaned_chats",
    "register",
    "release_all",
    "release_keys",
    "same_name_pids",
]

CHAT_PREFIX: Final = "chat:"
CHANNEL_PREFIX: Final = "channel:"
# a dead worker's row is kept this long after it expired, for `picobot workers`
_FORGET_AFTER_SECS: Final = 3600.0


def _now(conn: sqlite3.Connection) -> str:
    if is_postgres(conn):
        return "EXTRACT(EPOCH FROM clock_timestamp())::DOUBLE PRECISION"
    return "((julianday('now') - 2440587.5) * 86400.0)"


def live_worker(conn: sqlite3.Connection, column: str) -> str:
    """SQL true when `column` names an unexpired worker."""
    return f"EXISTS (SELECT 1 FROM workers w WHERE w.id = {column} AND w.expires_at > {_now(conn)})"


def db_now(conn: sqlite3.Connection) -> float:
    return float(conn.execute(f"SELECT {_now(conn)}").fetchone()[0])


def chat_key(channel: str, chat_id: str) -> str:
    return f"{CHAT_PREFIX}{channel}:{chat_id}"


def channel_key(channel: str) -> str:
    return f"{CHANNEL_PREFIX}{channel}"


@dataclass(frozen=True, slots=True)
class WorkerRow:
    id: str
    name: str
    host: str
    pid: int
    address: str
    started_at: float
    heartbeat_at: float
    expires_at: float
    now: float  # the database's clock when read

    @property
    def alive(self) -> bool:
        return self.expires_at > self.now


@dataclass(frozen=True, slots=True)
class LeaseHolder:
    key: str
    owner: str
    token: int


@dataclass(frozen=True, slots=True)
class Heartbeat:
    lapsed: bool  # the row had expired (or was gone): leases may have moved meanwhile
    held: dict[str, int]  # key → token of every lease this worker holds now
    dead_holders: int  # leases held by expired workers: someone should take them over
    others: int  # other live workers


def register(
    conn: sqlite3.Connection,
    worker_id: str,
    *,
    name: str,
    host: str,
    pid: int,
    address: str,
    lease_secs: float,
) -> None:
    now = _now(conn)
    conn.execute(
        "INSERT INTO workers (id, name, host, pid, address, started_at, heartbeat_at, expires_at) "
        f"VALUES (?, ?, ?, ?, ?, {now}, {now}, {now} + ?)",
        (worker_id, name, host, pid, address, lease_secs),
    )
    conn.execute(f"DELETE FROM workers WHERE expires_at < {now} - ?", (_FORGET_AFTER_SECS,))


def expire_predecessors(
    conn: sqlite3.Connection, worker_id: str, *, name: str, host: str, gone: Sequence[int]
) -> int:
    """Expire at once the rows of this host's earlier workers of the same name
    whose processes are `gone` (pids the caller found not running): a worker
    restarted after a crash takes its predecessor's leases without waiting."""
    if not gone:
        return 0
    marks = ",".join("?" * len(gone))
    cursor = conn.execute(
        f"UPDATE workers SET expires_at = {_now(conn)} - 1 WHERE name = ? AND host = ? "
        f"AND id != ? AND pid IN ({marks}) AND expires_at > {_now(conn)} - 1",
        (name, host, worker_id, *gone),
    )
    return cursor.rowcount


def same_name_pids(conn: sqlite3.Connection, worker_id: str, name: str, host: str) -> list[int]:
    rows = conn.execute(
        f"SELECT pid FROM workers WHERE name = ? AND host = ? AND id != ? AND expires_at > {_now(conn)}",
        (name, host, worker_id),
    ).fetchall()
    return [int(r[0]) for r in rows]


def heartbeat(conn: sqlite3.Connection, worker_id: str, *, lease_secs: float) -> Heartbeat:
    """Renew this worker (and so all its leases) for `lease_secs`. Raises
    WorkerForgotten when its row is gone (presumed dead for an hour)."""
    now = _now(conn)
    before = conn.execute(
        f"SELECT expires_at > {now} FROM workers WHERE id = ?", (worker_id,)
    ).fetchone()
    if before is None:
        raise WorkerForgotten(worker_id)
    lapsed = not before[0]
    conn.execute(
        f"UPDATE workers SET heartbeat_at = {now}, expires_at = {now} + ? WHERE id = ?",
        (lease_secs, worker_id),
    )
    held = {
        r[0]: int(r[1])
        for r in conn.execute("SELECT key, token FROM leases WHERE owner = ?", (worker_id,))
    }
    dead = conn.execute(
        "SELECT COUNT(*) FROM leases l WHERE NOT EXISTS (SELECT 1 FROM workers w "
        f"WHERE w.id = l.owner AND w.expires_at > {now})"
    ).fetchone()[0]
    others = conn.execute(
        f"SELECT COUNT(*) FROM workers WHERE id != ? AND expires_at > {now}", (worker_id,)
    ).fetchone()[0]
    return Heartbeat(lapsed, held, int(dead), int(others))


class WorkerForgotten(Exception):
    """This worker's row is gone: it was presumed dead long ago."""


_LIVE_OWNER: Final = (
    "EXISTS (SELECT 1 FROM workers w WHERE w.id = leases.owner AND w.expires_at > {now})"
)


def acquire(
    conn: sqlite3.Connection, worker_id: str, keys: Sequence[str]
) -> dict[str, LeaseHolder]:
    """Take each of `keys` that is free or whose holder is dead; the holder of
    each key afterwards (this worker, or the live one that has it)."""
    if not keys:
        return {}
    now = _now(conn)
    conn.executemany(
        "INSERT INTO leases (key, owner, token, taken_at) "
        f"VALUES (?, ?, 1, {now}) ON CONFLICT (key) DO NOTHING",
        [(k, worker_id) for k in keys],
    )
    live = _LIVE_OWNER.format(now=now)
    # a lease row locked by a write in flight (its worker paused mid-commit) is
    # skipped, not waited for: this worker's writes must not stall behind it
    unlocked = (
        " AND key IN (SELECT key FROM leases WHERE key = ? FOR UPDATE SKIP LOCKED)"
        if is_postgres(conn)
        else " AND key = ?"
    )
    conn.executemany(
        f"UPDATE leases SET owner = ?, token = token + 1, taken_at = {now} "
        f"WHERE key = ? AND owner != ? AND NOT {live}{unlocked}",
        [(worker_id, k, worker_id, k) for k in keys],
    )
    return holders(conn, keys)


def holders(conn: sqlite3.Connection, keys: Sequence[str]) -> dict[str, LeaseHolder]:
    found: dict[str, LeaseHolder] = {}
    for start in range(0, len(keys), 500):
        part = keys[start : start + 500]
        marks = ",".join("?" * len(part))
        for r in conn.execute(
            f"SELECT key, owner, token FROM leases WHERE key IN ({marks})", tuple(part)
        ):
            found[r[0]] = LeaseHolder(r[0], r[1], int(r[2]))
    return found


def check_fence(conn: sqlite3.Connection, key: str, worker_id: str, token: int) -> None:
    """Raise FenceLost unless `worker_id` still holds `key` with `token` and is
    unexpired. On PostgreSQL the lease row is held FOR SHARE until the caller's
    transaction ends: a takeover waits for this write, never the reverse."""
    lock = " FOR SHARE OF leases" if is_postgres(conn) else ""
    row = conn.execute(
        f"SELECT 1 FROM leases JOIN workers w ON w.id = leases.owner WHERE leases.key = ? "
        f"AND leases.owner = ? AND leases.token = ? AND w.expires_at > {_now(conn)}{lock}",
        (key, worker_id, token),
    ).fetchone()
    if row is None:
        raise FenceLost(key)


def release_keys(conn: sqlite3.Connection, worker_id: str, keys: Sequence[str]) -> int:
    cursor = conn.executemany(
        "DELETE FROM leases WHERE key = ? AND owner = ?", [(k, worker_id) for k in keys]
    )
    return cursor.rowcount


def release_all(conn: sqlite3.Connection, worker_id: str) -> int:
    """A clean stop: every lease let go and the worker's row gone."""
    released = conn.execute("DELETE FROM leases WHERE owner = ?", (worker_id,)).rowcount
    conn.execute("DELETE FROM workers WHERE id = ?", (worker_id,))
    return int(released)


def leases_of(conn: sqlite3.Connection, worker_id: str) -> dict[str, int]:
    return {
        r[0]: int(r[1])
        for r in conn.execute("SELECT key, token FROM leases WHERE owner = ?", (worker_id,))
    }


def orphaned_chats(conn: sqlite3.Connection, *, older_than_secs: float) -> list[tuple[str, str]]:
    """Chats with unfinished inbox rows whose lease is held by a dead worker,
    or by nobody for longer than `older_than_secs` (its recorder died before
    taking it)."""
    now = _now(conn)
    rows = conn.execute(
        "SELECT DISTINCT i.channel, i.chat_id, l.owner, i.received_at FROM inbox i "
        "LEFT JOIN leases l ON l.key = 'chat:' || i.channel || ':' || i.chat_id "
        "WHERE i.state != 'done' AND (l.key IS NULL OR NOT EXISTS (SELECT 1 FROM workers w "
        f"WHERE w.id = l.owner AND w.expires_at > {now}))"
    ).fetchall()
    chats: list[tuple[str, str]] = []
    now_value = db_now(conn)
    for channel, chat_id, owner, received_at in rows:
        if owner is None and parse_iso(received_at).timestamp() > now_value - older_than_secs:
            continue  # its recorder is taking it now
        if (channel, chat_id) not in chats:
            chats.append((channel, chat_id))
    return chats


def list_workers(conn: sqlite3.Connection) -> list[WorkerRow]:
    now = db_now(conn)
    return [
        WorkerRow(r[0], r[1], r[2], int(r[3]), r[4], float(r[5]), float(r[6]), float(r[7]), now)
        for r in conn.execute(
            "SELECT id, name, host, pid, address, started_at, heartbeat_at, expires_at "
            "FROM workers ORDER BY name, started_at"
        )
    ]


def all_leases(conn: sqlite3.Connection) -> list[LeaseHolder]:
    return [
        LeaseHolder(r[0], r[1], int(r[2]))
        for r in conn.execute("SELECT key, owner, token FROM leases ORDER BY key")
    ]
