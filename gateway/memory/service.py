"""The `MemoryService` the memory tools use, over `Store.memories`, and the
file writer that mirrors every scope's summary into AGENT.md's managed block.

Maps the agent's value types to storage's and back, enforces the per-scope
cap (a refused write is a `MemoryLimitError` the model reads) and is the
`SummarySource` of the memory-summary context part.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from agent.memory.summary_block import BEGIN, render_block, replace_block
from agent.memory.types import (
    MAX_ENTRIES_PER_SCOPE,
    MemoryEntry,
    MemoryLimitError,
    MemoryOrigin,
    MemoryScope,
    SourceType,
    WriteOutcome,
)
from storage.sql.memory.memories import MemoryRow, Provenance, Scope, ScopeFull
from storage.units.memories import MemoryStore

__all__ = ["MemoryGateway", "SummaryFile", "entry_of", "scope_of"]


def scope_of(scope: MemoryScope) -> Scope:
    return Scope(scope.kind, scope.key)


def entry_of(row: MemoryRow) -> MemoryEntry:
    return MemoryEntry(
        row.namespace, row.memory_key, row.content, row.updated_at, row.source.source_type,
        row.category,
    )  # fmt: skip


def _provenance(origin: MemoryOrigin) -> Provenance:
    return Provenance(
        SourceType.AGENT.value, origin.session_id, origin.message_id, origin.message_seq,
        origin.channel, origin.chat_id,
    )  # fmt: skip


class MemoryGateway:
    """Implements `agent.tools.base.MemoryService` and `SummarySource`."""

    def __init__(self, store: MemoryStore, *, cap: int = MAX_ENTRIES_PER_SCOPE) -> None:
        self.store = store
        self.cap = cap

    async def search(
        self, scope: MemoryScope, query: str, namespace: str | None, limit: int
    ) -> list[MemoryEntry]:
        rows = await self.store.search(scope_of(scope), query, namespace, limit)
        return [entry_of(r) for r in rows]

    async def get(self, scope: MemoryScope, namespace: str, key: str) -> MemoryEntry | None:
        row = await self.store.get(scope_of(scope), namespace, key)
        return entry_of(row) if row is not None else None

    async def entries(
        self, scope: MemoryScope, namespace: str | None, limit: int
    ) -> list[MemoryEntry]:
        return [entry_of(r) for r in await self.store.entries(scope_of(scope), namespace, limit)]

    async def put(
        self, scope: MemoryScope, namespace: str, key: str, content: str, origin: MemoryOrigin
    ) -> WriteOutcome:
        try:
            created = await self.store.put(
                scope_of(scope), namespace, key, content, _provenance(origin), cap=self.cap
            )
        except ScopeFull:
            raise MemoryLimitError(
                f"memory is full ({self.cap} entries for this user): update or delete an "
                "existing entry instead; maintenance drops low-value entries later"
            ) from None
        return WriteOutcome.CREATED if created else WriteOutcome.UPDATED

    async def update(
        self, scope: MemoryScope, namespace: str, key: str, content: str, origin: MemoryOrigin
    ) -> bool:
        return await self.store.update(
            scope_of(scope), namespace, key, content, _provenance(origin)
        )

    async def delete(self, scope: MemoryScope, namespace: str, key: str) -> bool:
        return await self.store.delete(scope_of(scope), namespace, key)

    async def summary(self, scope: MemoryScope) -> str | None:
        return await self.store.summary(scope_of(scope))


class SummaryFile:
    """AGENT.md's memory-summary block, rewritten from the database. One
    writer at a time; the file is replaced atomically (never half-written
    when AgentPromptFile reads it)."""

    def __init__(self, store: MemoryStore, path: Path) -> None:
        self.store = store
        self.path = path
        self._lock = asyncio.Lock()

    async def refresh(self) -> None:
        async with self._lock:
            sections = [(scope.key, text) for scope, text in await self.store.summaries()]
            await asyncio.to_thread(self._write, sections)

    def _write(self, sections: list[tuple[str, str]]) -> None:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            text = ""
        if not sections and BEGIN not in text:
            return  # nothing to show, and no block to empty
        updated = replace_block(text, render_block(sections))
        if updated == text:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temp = self.path.with_name(f".{self.path.name}.tmp")
        temp.write_text(updated, encoding="utf-8")
        os.replace(temp, self.path)
