"""An inverted index of each memory scope, kept in this process and brought
up to date from the table before every search (storage.sql.memory.search).

Why not SQLite's FTS5 (migrations 6 to 8, docs/memory.md): a trigram index
finds nothing for a two-character Chinese word, so those went to a `LIKE`
scan of the scope, and ranking every match by BM25 costs time in proportion
to how many entries match; at 10,000 entries per scope one search took
5 to 35 ms. Here a search looks terms up in dictionaries and touches only the
entries that contain them.

Terms of an entry: its ASCII words (namespace, key and content, lower case)
and, of each run of CJK characters, every character and every pair of
neighbours. A scope's index is synchronised by its `memory_scopes.revision`
(bumped by every change, never reset; storage.sql.memory.memories): when it moved, the
ids and `updated_at` of the scope's rows say which entries to drop, add or
re-read, so a change costs only the entries it touched. Scopes are kept
least recently searched first out, within a budget of postings.
"""

from __future__ import annotations

import bisect
import re
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Final

from storage.sql.memory.memories import Scope

__all__ = ["ASCII_WORD", "CJK_RUN", "MemoryIndex", "ScopeIndex", "deletions", "terms_of"]

ASCII_WORD: Final = re.compile(r"[a-z0-9]+")
CJK_RUN: Final = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff]+")
_MAX_POSTINGS: Final = 1_000_000  # ≈ 25 MB: at 500 short entries a scope holds ~10,000
_CHUNK: Final = 500  # ids per `IN (...)` when re-reading changed rows


def terms_of(text: str) -> set[str]:
    """The terms an entry can be found by (`text` is lower case)."""
    found = set(ASCII_WORD.findall(text))
    for run in CJK_RUN.findall(text):
        found.update(run)
        found.update(run[i : i + 2] for i in range(len(run) - 1))
    return found


@dataclass(slots=True)
class _Entry:
    namespace: str
    updated_at: str
    terms: frozenset[str]


def deletions(word: str) -> set[str]:
    """The word and every string one letter shorter: two words are at most one
    edit apart only if these sets of theirs meet (the converse is checked)."""
    return {word, *(word[:i] + word[i + 1 :] for i in range(len(word)))}


@dataclass(slots=True)
class ScopeIndex:
    """Postings of one scope. Its ASCII words are also kept sorted (a query
    word finds the words it begins) and by their deletions (it finds those
    one typo away) without comparing it with the whole vocabulary."""

    revision: int = -1
    entries: dict[int, _Entry] = field(default_factory=dict)
    words: dict[str, set[int]] = field(default_factory=dict)
    grams: dict[str, set[int]] = field(default_factory=dict)
    vocabulary: list[str] = field(default_factory=list)  # sorted
    near: dict[str, set[str]] = field(default_factory=dict)  # deletion -> words
    postings: int = 0

    def add(self, row_id: int, namespace: str, updated_at: str, text: str) -> None:
        self.discard(row_id)
        terms = frozenset(terms_of(text))
        self.entries[row_id] = _Entry(namespace, updated_at, terms)
        for term in terms:
            if not term.isascii():
                self.grams.setdefault(term, set()).add(row_id)
            elif (ids := self.words.get(term)) is not None:
                ids.add(row_id)
            else:
                self.words[term] = {row_id}
                bisect.insort(self.vocabulary, term)
                for variant in deletions(term):
                    self.near.setdefault(variant, set()).add(term)
        self.postings += len(terms)

    def discard(self, row_id: int) -> None:
        entry = self.entries.pop(row_id, None)
        if entry is None:
            return
        for term in entry.terms:
            table = self.words if term.isascii() else self.grams
            ids = table[term]
            ids.discard(row_id)
            if ids:
                continue
            del table[term]
            if table is self.words:
                del self.vocabulary[bisect.bisect_left(self.vocabulary, term)]
                for variant in deletions(term):
                    similar = self.near[variant]
                    similar.discard(term)
                    if not similar:
                        del self.near[variant]
        self.postings -= len(entry.terms)

    def starting_with(self, prefix: str) -> Iterator[str]:
        i = bisect.bisect_left(self.vocabulary, prefix)
        while i < len(self.vocabulary) and self.vocabulary[i].startswith(prefix):
            yield self.vocabulary[i]
            i += 1

    def near_words(self, word: str) -> set[str]:
        """Words that may be one edit from `word` (to be checked)."""
        found: set[str] = set()
        for variant in deletions(word):
            found.update(self.near.get(variant, ()))
        return found


class MemoryIndex:
    """The scopes' indexes, bounded by `max_postings` in all. Used from the
    database thread; the lock keeps it right if that ever changes."""

    def __init__(self, max_postings: int = _MAX_POSTINGS) -> None:
        self.max_postings = max_postings
        self._scopes: OrderedDict[Scope, ScopeIndex] = OrderedDict()
        self._lock = threading.Lock()

    def scope(self, conn: sqlite3.Connection, scope: Scope) -> ScopeIndex:
        """The scope's index as of the database now."""
        r = conn.execute(
            "SELECT revision FROM memory_scopes WHERE scope_kind = ? AND scope_key = ?",
            (scope.kind, scope.key),
        ).fetchone()
        revision = int(r[0]) if r is not None else 0
        with self._lock:
            index = self._scopes.pop(scope, None) or ScopeIndex()
            if index.revision != revision:
                _sync(conn, scope, index)
                index.revision = revision
            self._scopes[scope] = index
            self._evict()
            return index

    def _evict(self) -> None:
        total = sum(i.postings for i in self._scopes.values())
        while total > self.max_postings and len(self._scopes) > 1:
            _, dropped = self._scopes.popitem(last=False)
            total -= dropped.postings
        if total > self.max_postings:  # one scope over the whole budget: used, not kept
            self._scopes.clear()


def _sync(conn: sqlite3.Connection, scope: Scope, index: ScopeIndex) -> None:
    current = dict(
        conn.execute(
            "SELECT id, updated_at FROM memories WHERE scope_kind = ? AND scope_key = ?",
            (scope.kind, scope.key),
        ).fetchall()
    )
    for row_id in [i for i in index.entries if i not in current]:
        index.discard(row_id)
    changed = [
        row_id
        for row_id, updated_at in current.items()
        if (entry := index.entries.get(row_id)) is None or entry.updated_at != updated_at
    ]
    for start in range(0, len(changed), _CHUNK):
        chunk = changed[start : start + _CHUNK]
        _add_rows(index, conn.execute(
            "SELECT id, namespace, memory_key, content, updated_at FROM memories"
            f" WHERE id IN ({', '.join('?' * len(chunk))})",
            chunk,
        ))  # fmt: skip


def _add_rows(index: ScopeIndex, rows: Iterable[tuple[int, str, str, str, str]]) -> None:
    for row_id, namespace, key, content, updated_at in rows:
        index.add(row_id, namespace, updated_at, f"{namespace} {key} {content}".lower())
