"""Search over one scope's memories: the query's terms are looked up in the
scope's inverted index (storage.sql.memory.index), each entry is scored by how
many of the terms it covers, weighted a little by how rare each term is, and
recency breaks ties.

The query is split into terms (English words without stop words, Chinese runs
as overlapping pairs), because a Chinese sentence has no spaces to split it
into words. An English word matches a word of the entry that it begins
("piano" finds "pianos"), or, when it has four letters or more, a word one
edit away, counting for less (measured, docs/memory.md: typos of one letter
are common and share no trigram with the word meant).
"""

from __future__ import annotations

import heapq
import math
import sqlite3
from typing import Final

from storage.sql.memory.index import ASCII_WORD, CJK_RUN, MemoryIndex, ScopeIndex
from storage.sql.memory.memories import COLUMNS, MemoryRow, Scope, row_of

__all__ = ["query_terms", "search_memories"]

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
_FUZZY: Final = 0.7  # a word one edit away counts this much of an exact hit
_RARITY: Final = 0.1  # weight of the terms' rarity, below one term's coverage


def query_terms(query: str) -> list[str]:
    """English words (no stop words) and Chinese runs as overlapping bigrams."""
    text = query.lower()
    terms: list[str] = [w for w in ASCII_WORD.findall(text) if w not in _STOP]
    for run in CJK_RUN.findall(text):
        if len(run) <= 2:
            terms.append(run)  # asked for as such: kept even if it is a stop word
            continue
        bigrams = (run[i : i + 2] for i in range(len(run) - 1))
        terms.extend(g for g in bigrams if g not in _ZH_STOP and not _ZH_PARTICLES & set(g))
    return list(dict.fromkeys(terms))


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


def _matches(term: str, index: ScopeIndex) -> dict[int, float]:
    """Entry id -> how well it matches `term`: 1 for a word it begins (or
    the pair of Chinese characters), `_FUZZY` for a word one edit away."""
    if not term.isascii():
        return dict.fromkeys(index.grams.get(term, ()), 1.0)
    found: dict[int, float] = {}
    for word in index.starting_with(term):
        found.update(dict.fromkeys(index.words[word], 1.0))
    if len(term) >= 4:
        for word in index.near_words(term):
            if not word.startswith(term) and _one_edit(term, word):
                for row_id in index.words[word]:
                    found.setdefault(row_id, _FUZZY)
    return found


def search_memories(
    conn: sqlite3.Connection,
    scope: Scope,
    query: str,
    namespace: str | None,
    limit: int,
    *,
    index: MemoryIndex,
) -> list[MemoryRow]:
    terms = query_terms(query)
    if not terms:
        return []
    scoped = index.scope(conn, scope)
    entries = scoped.entries
    size = len(entries) or 1
    covered: dict[int, float] = {}  # id -> sum of its terms' hits
    rare: dict[int, float] = {}  # id -> the same, each hit times its term's rarity
    rarities = 0.0
    for term in terms:
        matches = _matches(term, scoped)
        rarity = math.log(1 + size / (len(matches) or 1))
        rarities += rarity
        for row_id, hit in matches.items():
            if namespace is None or entries[row_id].namespace == namespace:
                covered[row_id] = covered.get(row_id, 0.0) + hit
                rare[row_id] = rare.get(row_id, 0.0) + hit * rarity

    def rank(row_id: int) -> tuple[float, str, int]:
        score = covered[row_id] / len(terms) + _RARITY * rare[row_id] / rarities
        return score, entries[row_id].updated_at, row_id

    best = heapq.nlargest(limit, covered, key=rank)
    if not best:
        return []
    rows = {
        r["id"]: row_of(r)
        for r in conn.execute(
            f"SELECT {COLUMNS} FROM memories WHERE id IN ({', '.join('?' * len(best))})", best
        )
    }
    return [rows[i] for i in best if i in rows]
