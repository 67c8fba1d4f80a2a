"""Long-term memories (migration 6): rows per user scope and the per-scope
change counter that maintenance and the search index go by.

Synchronous functions of a `sqlite3.Connection` for `Database.read`/`write`.
Every change bumps the scope's `revision`, so maintenance knows which scopes
changed since it last ran and can refuse to apply a plan made from an older
snapshot. Search lives in storage.sql.memory.search (over storage.sql.memory.index); maintenance's write-back in
storage.sql.memory.maintenance.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from storage.clock import now_iso

__all__ = [
    "MemoryRow",
    "Provenance",
    "Scope",
    "ScopeFull",
    "ScopeInfo",
    "bump_revision",
    "count_in_scope",
    "delete_memory",
    "forget_scope",
    "get_memory",
    "list_memories",
    "list_scopes",
    "put_memory",
    "summary_of",
    "update_memory",
]


class ScopeFull(Exception):
    """A new entry would take the scope over its cap."""


@dataclass(frozen=True, slots=True)
class Scope:
    kind: str
    key: str


@dataclass(frozen=True, slots=True)
class Provenance:
    source_type: str
    session_id: str | None = None
    message_id: str | None = None
    message_seq: int | None = None
    channel: str | None = None
    chat_id: str | None = None


@dataclass(frozen=True, slots=True)
class MemoryRow:
    id: int
    namespace: str
    memory_key: str
    content: str
    category: str | None
    source: Provenance
    created_at: str
    updated_at: str


@dataclass(frozen=True, slots=True)
class ScopeInfo:
    scope: Scope
    entries: int
    revision: int
    maintained_revision: int
    summary: str | None


COLUMNS = (
    "id, namespace, memory_key, content, category, source_type, source_session_id, "
    "source_message_id, source_message_seq, source_channel, source_chat_id, created_at, updated_at"
)


def row_of(r: sqlite3.Row) -> MemoryRow:
    source = Provenance(
        r["source_type"],
        r["source_session_id"],
        r["source_message_id"],
        r["source_message_seq"],
        r["source_channel"],
        r["source_chat_id"],
    )
    return MemoryRow(
        r["id"], r["namespace"], r["memory_key"], r["content"], r["category"], source,
        r["created_at"], r["updated_at"],
    )  # fmt: skip


def bump_revision(conn: sqlite3.Connection, scope: Scope) -> None:
    conn.execute(
        "INSERT INTO memory_scopes (scope_kind, scope_key, revision) VALUES (?, ?, 1) "
        "ON CONFLICT (scope_kind, scope_key) DO UPDATE SET revision = memory_scopes.revision + 1",
        (scope.kind, scope.key),
    )


def get_memory(
    conn: sqlite3.Connection, scope: Scope, namespace: str, key: str
) -> MemoryRow | None:
    r = conn.execute(
        f"SELECT {COLUMNS} FROM memories WHERE scope_kind = ? AND scope_key = ? "
        "AND namespace = ? AND memory_key = ?",
        (scope.kind, scope.key, namespace, key),
    ).fetchone()
    return row_of(r) if r is not None else None


def count_in_scope(conn: sqlite3.Connection, scope: Scope) -> int:
    found: int = conn.execute(
        "SELECT count(*) FROM memories WHERE scope_kind = ? AND scope_key = ?",
        (scope.kind, scope.key),
    ).fetchone()[0]
    return found


def list_memories(
    conn: sqlite3.Connection, scope: Scope, namespace: str | None, limit: int | None = None
) -> list[MemoryRow]:
    """Newest first; every namespace when `namespace` is None."""
    sql = f"SELECT {COLUMNS} FROM memories WHERE scope_kind = ? AND scope_key = ?"
    params: list[object] = [scope.kind, scope.key]
    if namespace is not None:
        sql += " AND namespace = ?"
        params.append(namespace)
    sql += " ORDER BY updated_at DESC, id DESC"
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    return [row_of(r) for r in conn.execute(sql, params)]


def put_memory(
    conn: sqlite3.Connection,
    scope: Scope,
    namespace: str,
    key: str,
    content: str,
    source: Provenance,
    *,
    cap: int | None,
    category: str | None = None,
) -> bool:
    """Insert or replace one entry; True when it is new. Raises `ScopeFull`
    for a new entry in a scope already holding `cap` (None: no cap)."""
    existing = get_memory(conn, scope, namespace, key)
    now = now_iso()
    if existing is None:
        if cap is not None and count_in_scope(conn, scope) >= cap:
            raise ScopeFull(f"this user's memory is full ({cap} entries)")
        conn.execute(
            "INSERT INTO memories (scope_kind, scope_key, namespace, memory_key, content, category,"
            " source_type, source_session_id, source_message_id, source_message_seq,"
            " source_channel, source_chat_id, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                scope.kind, scope.key, namespace, key, content, category, source.source_type,
                source.session_id, source.message_id, source.message_seq, source.channel,
                source.chat_id, now, now,
            ),
        )  # fmt: skip
    else:
        conn.execute(
            "UPDATE memories SET content = ?, category = coalesce(?, category), source_type = ?,"
            " source_session_id = ?, source_message_id = ?, source_message_seq = ?,"
            " source_channel = ?, source_chat_id = ?, updated_at = ? WHERE id = ?",
            (
                content, category, source.source_type, source.session_id, source.message_id,
                source.message_seq, source.channel, source.chat_id, now, existing.id,
            ),
        )  # fmt: skip
    bump_revision(conn, scope)
    return existing is None


def update_memory(
    conn: sqlite3.Connection,
    scope: Scope,
    namespace: str,
    key: str,
    content: str,
    source: Provenance,
) -> bool:
    """Replace an existing entry's content; False when there is none."""
    if get_memory(conn, scope, namespace, key) is None:
        return False
    put_memory(conn, scope, namespace, key, content, source, cap=None)
    return True


def delete_memory(conn: sqlite3.Connection, scope: Scope, namespace: str, key: str) -> bool:
    existing = get_memory(conn, scope, namespace, key)
    if existing is None:
        return False
    remove_row(conn, existing)
    bump_revision(conn, scope)
    return True


def remove_row(conn: sqlite3.Connection, row: MemoryRow) -> None:
    """Delete one row (the caller bumps the revision)."""
    conn.execute("DELETE FROM memories WHERE id = ?", (row.id,))


def forget_scope(conn: sqlite3.Connection, scope: Scope) -> int:
    """Everything kept about a scope: entries, audit trail, summary. Returns
    how many entries there were. The scope's row stays, with no summary and
    its revision bumped: a revision that went back to 1 could equal what a
    search index (storage.sql.memory.index) last saw, and hide the change."""
    params = (scope.kind, scope.key)
    gone = conn.execute("DELETE FROM memories WHERE scope_kind = ? AND scope_key = ?", params)
    conn.execute("DELETE FROM memory_audit WHERE scope_kind = ? AND scope_key = ?", params)
    conn.execute(
        "UPDATE memory_scopes SET revision = revision + 1, maintained_revision = revision + 1,"
        " summary = NULL, maintained_at = NULL WHERE scope_kind = ? AND scope_key = ?",
        params,
    )
    return gone.rowcount


def summary_of(conn: sqlite3.Connection, scope: Scope) -> str | None:
    r = conn.execute(
        "SELECT summary FROM memory_scopes WHERE scope_kind = ? AND scope_key = ?",
        (scope.kind, scope.key),
    ).fetchone()
    return r[0] if r is not None and r[0] else None


def list_scopes(conn: sqlite3.Connection, limit: int | None = None) -> list[ScopeInfo]:
    """Every scope with entries or a summary, by key; the first `limit` of them."""
    sql = (
        "SELECT s.scope_kind, s.scope_key, s.revision, s.maintained_revision, s.summary,"
        " (SELECT count(*) FROM memories m WHERE m.scope_kind = s.scope_kind"
        "  AND m.scope_key = s.scope_key) AS entries"
        " FROM memory_scopes s WHERE s.summary != '' OR EXISTS (SELECT 1 FROM memories m"
        "  WHERE m.scope_kind = s.scope_kind AND m.scope_key = s.scope_key)"
        " ORDER BY s.scope_kind, s.scope_key"
    )
    params: list[object] = []
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    rows = conn.execute(sql, params).fetchall()
    return [ScopeInfo(Scope(r[0], r[1]), r["entries"], r[2], r[3], r[4]) for r in rows]
