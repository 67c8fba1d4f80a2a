"""Memories, their search index and summaries survive a backup and a restore."""

from __future__ import annotations

import io
from pathlib import Path

from gateway.cli.backup import run_backup, run_restore
from storage.sql.memory.memories import Provenance, Scope
from storage.sqlite.db import Database
from storage.units.memories import MemoryStore

U1 = Scope("user", "feishu:u1")


async def test_memories_survive_backup_and_restore(tmp_path: Path) -> None:
    live, copy = tmp_path / "live.db", tmp_path / "backup.db"
    async with Database(live) as db:
        store = MemoryStore(db)
        await store.put(U1, "tasks", "lesson", "每周六下午上钢琴课", Provenance("agent"), cap=None)
        assert await run_backup(live, copy, out=io.StringIO()) == 0
        await store.forget(U1)  # lost after the backup …
    assert run_restore(copy, live, force=False, out=io.StringIO()) == 0
    async with Database(live) as db:  # … and back from it, index and all
        found = await MemoryStore(db).search(U1, "钢琴课", None, 5)
        assert [r.memory_key for r in found] == ["lesson"]
