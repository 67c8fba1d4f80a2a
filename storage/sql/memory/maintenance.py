"""Memory maintenance's side of storage: which scopes changed, a scope's
snapshot, and applying a checked plan to it in one transaction.

A plan is applied only if the scope has not changed since its snapshot was
taken (the revision still matches): a memory written while the model was
thinking is never overwritten by a plan that did not see it; that scope is
simply maintained at the next run. Whatever a plan removes or overwrites is
copied into `memory_audit` first.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from storage.clock import now_iso
from storage.sql.memory.memories import (
    MemoryRow,
    Provenance,
    Scope,
    get_memory,
    list_memories,
    put_memory,
    remove_row,
)

__all__ = [
    "MAINTENANCE_SOURCE",
    "Removal",
    "Rewrite",
    "ScopeSnapshot",
    "Upsert",
    "all_summaries",
    "apply_rewrite",
    "changed_scopes",
    "snapshot",
]

MAINTENANCE_SOURCE = "memory_maintenance"


@dataclass(frozen=True, slots=True)
class ScopeSnapshot:
    scope: Scope
    revision: int
    rows: list[MemoryRow]


@dataclass(frozen=True, slots=True)
class Upsert:
    namespace: str
    memory_key: str
    content: str
    category: str | None


@dataclass(frozen=True, slots=True)
class Removal:
    namespace: str
    memory_key: str
    action: str  # merged | superseded | dropped (the audit row's action)
    reason: str
    replaced_by: str | None = None  # "namespace/key"


@dataclass(frozen=True, slots=True)
class Rewrite:
    """What a validated plan does to one scope."""

    upserts: Sequence[Upsert] = ()
    removals: Sequence[Removal] = ()
    categories: Sequence[tuple[str, str, str]] = ()  # (namespace, key, category)
    summary: str = ""


def changed_scopes(conn: sqlite3.Connection) -> list[Scope]:
    rows = conn.execute(
        "SELECT scope_kind, scope_key FROM memory_scopes WHERE revision > maintained_revision"
        " ORDER BY scope_kind, scope_key"
    ).fetchall()
    return [Scope(r[0], r[1]) for r in rows]


def snapshot(conn: sqlite3.Connection, scope: Scope) -> ScopeSnapshot:
    r = conn.execute(
        "SELECT revision FROM memory_scopes WHERE scope_kind = ? AND scope_key = ?",
        (scope.kind, scope.key),
    ).fetchone()
    rows = list_memories(conn, scope, None)
    rows.reverse()  # oldest first: the order the model reads them in
    return ScopeSnapshot(scope, r[0] if r is not None else 0, rows)


def _audit(conn: sqlite3.Connection, scope: Scope, row: MemoryRow, removal: Removal) -> None:
    conn.execute(
        "INSERT INTO memory_audit (scope_kind, scope_key, namespace, memory_key, content, action,"
        " reason, replaced_by, source_type, created_at, updated_at, recorded_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            scope.kind, scope.key, row.namespace, row.memory_key, row.content, removal.action,
            removal.reason, removal.replaced_by, row.source.source_type, row.created_at,
            row.updated_at, now_iso(),
        ),
    )  # fmt: skip


def apply_rewrite(
    conn: sqlite3.Connection, scope: Scope, expected_revision: int, rewrite: Rewrite
) -> bool:
    """Apply `rewrite`; False (and nothing written) if the scope changed meanwhile."""
    current = conn.execute(
        "SELECT revision FROM memory_scopes WHERE scope_kind = ? AND scope_key = ?",
        (scope.kind, scope.key),
    ).fetchone()
    if current is None or current[0] != expected_revision:
        return False
    source = Provenance(MAINTENANCE_SOURCE)
    for removal in rewrite.removals:
        row = get_memory(conn, scope, removal.namespace, removal.memory_key)
        if row is not None:
            _audit(conn, scope, row, removal)
            remove_row(conn, row)
    for upsert in rewrite.upserts:
        old = get_memory(conn, scope, upsert.namespace, upsert.memory_key)
        if old is not None and old.content != upsert.content:
            reason = "rewritten by memory maintenance"
            _audit(conn, scope, old, Removal(old.namespace, old.memory_key, "merged", reason))
        put_memory(
            conn, scope, upsert.namespace, upsert.memory_key, upsert.content, source,
            cap=None, category=upsert.category,
        )  # fmt: skip
    for namespace, key, category in rewrite.categories:
        conn.execute(
            "UPDATE memories SET category = ? WHERE scope_kind = ? AND scope_key = ?"
            " AND namespace = ? AND memory_key = ?",
            (category, scope.kind, scope.key, namespace, key),
        )
    conn.execute(
        "UPDATE memory_scopes SET summary = ?, maintained_revision = revision, maintained_at = ?"
        " WHERE scope_kind = ? AND scope_key = ?",
        (rewrite.summary or None, now_iso(), scope.kind, scope.key),
    )
    return True


def all_summaries(conn: sqlite3.Connection) -> list[tuple[Scope, str]]:
    rows = conn.execute(
        "SELECT scope_kind, scope_key, summary FROM memory_scopes"
        " WHERE summary IS NOT NULL AND summary != '' ORDER BY scope_kind, scope_key"
    ).fetchall()
    return [(Scope(r[0], r[1]), r[2]) for r in rows]
