"""`MemoryStore`: long-term memory as named units of work (`Store.memories`).

Like `Store`, each method is one transaction; a returned write is durable.
"""

from __future__ import annotations

import functools
import time
from collections import OrderedDict

from storage.database import Database
from storage.sql.memory import maintenance as memory_maintenance
from storage.sql.memory import memories
from storage.sql.memory.index import MemoryIndex
from storage.sql.memory.maintenance import Rewrite, ScopeSnapshot
from storage.sql.memory.memories import MemoryRow, Provenance, Scope, ScopeInfo
from storage.sql.memory.search import search_memories

__all__ = ["MemoryStore"]

# Every private turn asks for its sender's summary; it changes only through
# maintenance and forgetting (both through this object, which drops the entry),
# so it is kept here instead of costing a storage round trip per turn. The TTL
# bounds how long another process's change (the CLI) can go unseen.
_SUMMARY_TTL_SECS = 60.0
_SUMMARY_CACHE_MAX = 1024


class MemoryStore:
    def __init__(self, db: Database, index: MemoryIndex | None = None) -> None:
        self.db = db
        self._summaries: OrderedDict[Scope, tuple[str | None, float]] = OrderedDict()
        self._index = index or MemoryIndex()  # used on the database thread only

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
                search_memories,
                scope=scope,
                query=query,
                namespace=namespace,
                limit=limit,
                index=self._index,
            )
        )

    async def forget(self, scope: Scope) -> int:
        try:
            return await self.db.write(functools.partial(memories.forget_scope, scope=scope))
        finally:
            self._summaries.pop(scope, None)

    async def summary(self, scope: Scope) -> str | None:
        now = time.monotonic()
        hit = self._summaries.get(scope)
        if hit is not None and now - hit[1] < _SUMMARY_TTL_SECS:
            return hit[0]
        value = await self.db.read(functools.partial(memories.summary_of, scope=scope))
        self._summaries[scope] = (value, now)
        self._summaries.move_to_end(scope)
        while len(self._summaries) > _SUMMARY_CACHE_MAX:
            self._summaries.popitem(last=False)
        return value

    async def scopes(self, limit: int | None = None) -> list[ScopeInfo]:
        """Every scope with entries or a summary, by key (the first `limit`)."""
        return await self.db.read(functools.partial(memories.list_scopes, limit=limit))

    async def changed_scopes(self) -> list[Scope]:
        return await self.db.read(memory_maintenance.changed_scopes)

    async def snapshot(self, scope: Scope) -> ScopeSnapshot:
        return await self.db.read(functools.partial(memory_maintenance.snapshot, scope=scope))

    async def apply(self, scope: Scope, revision: int, rewrite: Rewrite) -> bool:
        try:
            return await self.db.write(
                functools.partial(
                    memory_maintenance.apply_rewrite,
                    scope=scope,
                    expected_revision=revision,
                    rewrite=rewrite,
                )
            )
        finally:
            self._summaries.pop(scope, None)

    async def summaries(self) -> list[tuple[Scope, str]]:
        return await self.db.read(memory_maintenance.all_summaries)
