"""Search over one scope's memories: FTS5 trigram candidates ranked by BM25,
a plain-table fallback for terms shorter than a trigram, then a rerank by how
many of the query's terms each entry covers, with recency breaking ties.

Why not the FTS query alone (measured, docs/memory.md): trigram MATCH finds
nothing for a two-character Chinese word, a Chinese sentence has no spaces to
split it into words, and a one-letter English typo often shares no trigram
with the word meant. So the query is split into terms (English words, Chinese
runs as overlapping bigrams), short terms are looked up with LIKE on the
`memories` table itself (LIKE on the trigram table silently misses short
Chinese patterns on SQLite 3.40), and an English word with no exact hit may
match a word one edit away. When the index finds too little, the scope's
newest entries are scanned too (a scope holds at most a few hundred).
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable
from typing import Final

from storage.memories import COLUMNS, MemoryRow, Scope, row_of

__all__ = ["query_terms", "search_memories"]

_ASCII: Final = re.compile(r"[a-z0-9]+")
_CJK: Final = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff]+")
_STOP: Final = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "do",
        "does",
        "for",
        "from",
        "has",
        "have",
        "how",
        "i",
        "in",
        "is",
        "it",
        "its",
        "me",
        "my",
        "no",
        "not",
        "of",
        "on",
        "or",
        "our",
        "she",
        "so",
        "that",
        "the",
        "their",
        "them",
        "they",
        "this",
        "to",
        "was",
        "we",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "you",
        "your",
        "user",
        "users",
        "about",
        "does",
        "did",
    ]
)
# Chinese question and function words: a bigram holding one says nothing about the topic
_ZH_PARTICLES: Final = frozenset("的了吗呢么吧啊什")
_ZH_STOP: Final = frozenset({"什么", "怎么", "多少", "哪里", "哪个", "哪些", "用户", "是否"})
_CANDIDATES: Final = 200
_SCAN: Final = 2_000  # newest entries scanned when the index finds too little
_FUZZY: Final = 0.7  # a word one edit away counts this much of an exact hit


def query_terms(query: str) -> list[str]:
    """English words (no stop words) and Chinese runs as overlapping bigrams."""
    text = query.lower()
    terms: list[str] = [w for w in _ASCII.findall(text) if w not in _STOP]
    for run in _CJK.findall(text):
        if len(run) <= 2:
            terms.append(run)  # asked for as such: kept even if it is a stop word
            continue
        bigrams = (run[i : i + 2] for i in range(len(run) - 1))
        terms.extend(g for g in bigrams if g not in _ZH_STOP and not _ZH_PARTICLES & set(g))
    return list(dict.fromkeys(terms))


def _fts_query(query: str) -> str | None:
    """An OR of quoted trigrams: each word's trigrams, each Chinese run's trigrams."""
    text = query.lower()
    grams: list[str] = []
    for word in _ASCII.findall(text):
        if word in _STOP or len(word) < 3:
            continue
        grams.extend(word[i : i + 3] for i in range(len(word) - 2))
    for run in _CJK.findall(text):
        grams.extend(run[i : i + 3] for i in range(len(run) - 2))
    unique = list(dict.fromkeys(grams))
    return " OR ".join(f'"{g}"' for g in unique) if unique else None


def _one_edit(a: str, b: str) -> bool:
    """Whether `a` and `b` differ by at most one insertion, deletion,
    substitution or swap of neighbours."""
    if a == b:
        return True
    la, lb = len(a), len(b)
    if abs(la - lb) > 1:
        return False
    if la == lb:
        diff = [i for i in range(la) if a[i] != b[i]]
        if len(diff) == 1:
            return True
        i = diff[0]
        return len(diff) == 2 and diff[1] == i + 1 and a[i] == b[i + 1] and a[i + 1] == b[i]
    if la > lb:
        a, b = b, a
    i = 0
    while i < len(a) and a[i] == b[i]:
        i += 1
    return a[i:] == b[i + 1 :]


def _coverage(terms: list[str], row: MemoryRow) -> float:
    text = f"{row.namespace} {row.memory_key} {row.content}".lower()
    words: set[str] | None = None
    hit = 0.0
    for term in terms:
        if term in text:
            hit += 1.0
        elif len(term) >= 4 and term.isascii():
            if words is None:
                words = set(_ASCII.findall(text))
            if any(_one_edit(term, w) for w in words if abs(len(w) - len(term)) <= 1):
                hit += _FUZZY
    return hit / len(terms)


def _scope_sql(scope: Scope, namespace: str | None, alias: str = "") -> tuple[str, list[object]]:
    sql = f" AND {alias}scope_kind = ? AND {alias}scope_key = ?"
    params: list[object] = [scope.kind, scope.key]
    if namespace is not None:
        sql += f" AND {alias}namespace = ?"
        params.append(namespace)
    return sql, params


def _escape_like(term: str) -> str:
    return term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def search_memories(
    conn: sqlite3.Connection, scope: Scope, query: str, namespace: str | None, limit: int
) -> list[MemoryRow]:
    terms = query_terms(query)
    if not terms:
        return []
    found: dict[int, tuple[MemoryRow, float]] = {}  # id -> (row, bm25 bonus in [0, 1])
    where, params = _scope_sql(scope, namespace, "m.")
    match = _fts_query(query)
    if match is not None:
        ranked = conn.execute(
            f"SELECT {', '.join('m.' + c for c in COLUMNS.split(', '))},"
            " bm25(memories_fts) AS rank FROM memories_fts f"
            " JOIN memories m ON m.id = f.rowid WHERE memories_fts MATCH ?"
            f"{where} ORDER BY rank LIMIT ?",
            [match, *params, _CANDIDATES],
        ).fetchall()
        best = min((r["rank"] for r in ranked), default=0.0) or -1.0  # bm25: lower is better
        for r in ranked:
            found[r["id"]] = (row_of(r), r["rank"] / best)
    short = [t for t in terms if len(t) < 3]
    if short:
        where, params = _scope_sql(scope, namespace)
        likes = " OR ".join(
            "content LIKE ? ESCAPE '\\' OR memory_key LIKE ? ESCAPE '\\'" for _ in short
        )
        patterns = [p for t in short for p in (f"%{_escape_like(t)}%",) * 2]
        _add(found, conn.execute(
            f"SELECT {COLUMNS} FROM memories WHERE ({likes}){where}"
            " ORDER BY updated_at DESC LIMIT ?",
            [*patterns, *params, _CANDIDATES],
        ))  # fmt: skip
    if len(found) < limit or _typo_suspected(terms, (row for row, _ in found.values())):
        where, params = _scope_sql(scope, namespace)
        _add(found, conn.execute(
            f"SELECT {COLUMNS} FROM memories WHERE 1 = 1{where} ORDER BY updated_at DESC LIMIT ?",
            [*params, _SCAN],
        ))  # fmt: skip
    scored = []
    for row, bonus in found.values():
        coverage = _coverage(terms, row)
        if coverage > 0:
            scored.append((coverage + 0.1 * bonus, row.updated_at, row.id, row))
    scored.sort(key=lambda s: (s[0], s[1], s[2]), reverse=True)
    return [s[3] for s in scored[:limit]]


def _add(found: dict[int, tuple[MemoryRow, float]], rows: Iterable[sqlite3.Row]) -> None:
    for r in rows:
        if r["id"] not in found:
            found[r["id"]] = (row_of(r), 0.0)


def _typo_suspected(terms: list[str], rows: Iterable[MemoryRow]) -> bool:
    """An English word of the query that no candidate contains exactly."""
    words = [t for t in terms if t.isascii() and len(t) >= 4]
    if not words:
        return False
    texts = [f"{r.memory_key} {r.content}".lower() for r in rows]
    return any(not any(w in text for text in texts) for w in words)
