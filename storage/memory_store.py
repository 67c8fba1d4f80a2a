"""`MemoryStore`: long-term memory as named units of work (`Store.memories`).

Like `Store`, each method is one transaction; a returned write is durable.
"""

from __future__ import annotations

import functools

from storage import memories, memory_maintenance
from storage.db import Database
from storage.memories import MemoryRow, Provenance, Scope, ScopeInfo
from storage.memory_maintenance import Rewrite, ScopeSnapshot
from storage.memory_search import search_memories

__all__ = ["MemoryStore"]


class MemoryStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def put(
        self,
        scope: Scope,
        namespace: str,
        key: str,
        content: str,
        source: Provenance,
        *,
        cap: int | None,
    ) -> bool:
        """True when the entry is new; raises `ScopeFull` over `cap`."""
        return await self.db.write(
            functools.partial(
                memories.put_memory, scope=scope, namespace=namespace, key=key,
                content=content, source=source, cap=cap,
            )
        )  # fmt: skip

    async def update(
        self, scope: Scope, namespace: str, key: str, content: str, source: Provenance
    ) -> bool:
        return await self.db.write(
            functools.partial(
                memories.update_memory, scope=scope, namespace=namespace, key=key,
                content=content, source=source,
            )
        )  # fmt: skip

    async def delete(self, scope: Scope, namespace: str, key: str) -> bool:
        return await self.db.write(
            functools.partial(memories.delete_memory, scope=scope, namespace=namespace, key=key)
        )

    async def get(self, scope: Scope, namespace: str, key: str) -> MemoryRow | None:
        return await self.db.read(
            functools.partial(memories.get_memory, scope=scope, namespace=namespace, key=key)
        )

    async def entries(
        self, scope: Scope, namespace: str | None, limit: int | None = None
    ) -> list[MemoryRow]:
        return await self.db.read(
            functools.partial(memories.list_memories, scope=scope, namespace=namespace, limit=limit)
        )

    async def search(
        self, scope: Scope, query: str, namespace: str | None, limit: int
    ) -> list[MemoryRow]:
        return await self.db.read(
            functools.partial(
                search_memories, scope=scope, query=query, namespace=namespace, limit=limit
            )
        )

    async def forget(self, scope: Scope) -> int:
        return await self.db.write(functools.partial(memories.forget_scope, scope=scope))

    async def summary(self, scope: Scope) -> str | None:
        return await self.db.read(functools.partial(memories.summary_of, scope=scope))

    async def scopes(self) -> list[ScopeInfo]:
        return await self.db.read(memories.list_scopes)

    async def changed_scopes(self) -> list[Scope]:
        return await self.db.read(memory_maintenance.changed_scopes)

    async def snapshot(self, scope: Scope) -> ScopeSnapshot:
        return await self.db.read(functools.partial(memory_maintenance.snapshot, scope=scope))

    async def apply(self, scope: Scope, revision: int, rewrite: Rewrite) -> bool:
        return await self.db.write(
            functools.partial(
                memory_maintenance.apply_rewrite,
                scope=scope,
                expected_revision=revision,
                rewrite=rewrite,
            )
        )

    async def summaries(self) -> list[tuple[Scope, str]]:
        return await self.db.read(memory_maintenance.all_summaries)
