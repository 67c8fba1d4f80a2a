"""Scenario (c): search latency in one user scope holding N memories (10,000
by default, far past the 500 a scope may hold, to see the index at scale).

Memories are written straight through storage (the cap does not apply
there), mixed English and Chinese; then each query of a fixed mix (English
words, a typo, two-character and longer Chinese) is timed through
`MemoryStore.search`, which is what memory_search runs. Target: p50 ≤ 2 ms.
Also reported: the first search, which builds the scope's index, and a search
right after one write, which brings it up to date."""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from storage.sql.memory.memories import Provenance, Scope, put_memory
from storage.sqlite.db import Database
from storage.units.memories import MemoryStore

_WORDS = ["piano", "coffee", "marathon", "garden", "visa", "budget", "thesis", "kitchen", "guitar", "chess", "travel", "oslo", "berlin", "valencia", "tomato", "jazz", "novel", "kubernetes", "mortgage", "violin"]  # fmt: skip
_ZH = "钢琴咖啡马拉松花园签证预算论文厨房吉他象棋旅行北京上海成都番茄爵士小说房贷小提琴"
_QUERIES = ["piano lessons", "marathn training", "钢琴", "成都番茄", "kubernetes mortgage",
            "小提琴课", "oslo jazz", "预算"]  # fmt: skip


def _content(i: int) -> str:
    words = " ".join(_WORDS[(i * k) % len(_WORDS)] for k in (1, 3, 7))
    zh = "".join(_ZH[(i * k) % len(_ZH)] for k in (1, 2, 5, 11))
    return f"note {i}: {words} {zh}"


async def run(memories: int = 10_000, rounds: int = 50) -> dict[str, Any]:
    scope = Scope("user", "bench:u1")
    with tempfile.TemporaryDirectory() as tmp:
        async with Database(Path(tmp) / "bench.db") as db:

            def fill(conn: Any) -> None:
                for i in range(memories):
                    put_memory(conn, scope, "notes", f"n{i}", _content(i), Provenance("agent"),
                               cap=None)  # fmt: skip

            await db.write(fill)
            store = MemoryStore(db)
            started = time.perf_counter()
            await store.search(scope, _QUERIES[0], None, 10)
            first_ms = (time.perf_counter() - started) * 1000
            await store.put(scope, "notes", "n0", "rewritten: piano", Provenance("agent"), cap=None)
            started = time.perf_counter()
            await store.search(scope, _QUERIES[0], None, 10)
            after_write_ms = (time.perf_counter() - started) * 1000
            timings: list[float] = []
            for _ in range(rounds):
                for query in _QUERIES:
                    started = time.perf_counter()
                    await store.search(scope, query, None, 10)
                    timings.append((time.perf_counter() - started) * 1000)
    timings.sort()
    return {
        "scenario": "memory_search",
        "memories_per_scope": memories,
        "searches": len(timings),
        "p50_ms": round(statistics.median(timings), 3),
        "p95_ms": round(timings[int(len(timings) * 0.95) - 1], 3),
        "target_p50_ms": 2.0,
        "first_search_ms": round(first_ms, 1),
        "search_after_a_write_ms": round(after_write_ms, 2),
    }
