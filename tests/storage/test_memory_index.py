"""The in-process search index (storage/sql/memory/index.py): it follows every
change, made here or through another connection, forgetting included, and
stays right when its budget makes it drop scopes."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from storage.database import Database
from storage.sql.memory.index import MemoryIndex, ScopeIndex
from storage.sql.memory.memories import Provenance, Scope
from storage.units.memories import MemoryStore
from tests.storage.conftest import OpenStorage

U1 = Scope("user", "feishu:u1")
U2 = Scope("user", "feishu:u2")
SOURCE = Provenance("agent", "s1", "m1", 1)


@pytest.fixture
async def db(open_storage: OpenStorage) -> AsyncIterator[Database]:
    async with open_storage() as opened:
        yield opened


async def keys(store: MemoryStore, scope: Scope, query: str) -> list[str]:
    return [r.memory_key for r in await store.search(scope, query, None, 10)]


async def test_forgetting_then_writing_again_never_finds_the_forgotten(db: Database) -> None:
    store = MemoryStore(db)
    await store.put(U1, "profile", "hobby", "plays the piano", SOURCE, cap=None)
    assert await keys(store, U1, "piano") == ["hobby"]
    assert await store.forget(U1) == 1
    # the same key again, one write after the forget: a revision counted from 1
    # again would equal the one the index saw and hide the change
    await store.put(U1, "profile", "hobby", "plays the violin", SOURCE, cap=None)
    assert await keys(store, U1, "piano") == []
    assert await keys(store, U1, "violin") == ["hobby"]
    assert await store.summary(U1) is None


async def test_a_write_through_another_connection_is_seen(
    open_storage: OpenStorage, db: Database
) -> None:
    store = MemoryStore(db)
    await store.put(U1, "profile", "hobby", "plays the piano", SOURCE, cap=None)
    assert await keys(store, U1, "piano") == ["hobby"]
    async with open_storage() as other:  # e.g. `picobot memory` in a shell
        cli = MemoryStore(other)
        await cli.update(U1, "profile", "hobby", "plays chess", SOURCE)
        await cli.put(U1, "tasks", "lesson", "piano lesson on friday", SOURCE, cap=None)
    assert await keys(store, U1, "piano") == ["lesson"]
    assert await keys(store, U1, "chess") == ["hobby"]


async def test_a_budget_that_drops_scopes_keeps_answers_right(db: Database) -> None:
    store = MemoryStore(db, index=MemoryIndex(max_postings=6))
    await store.put(U1, "profile", "hobby", "plays the piano on sundays", SOURCE, cap=None)
    await store.put(U2, "profile", "hobby", "grows tomatoes in the garden", SOURCE, cap=None)
    for _ in range(2):
        assert await keys(store, U1, "piano") == ["hobby"]
        assert await keys(store, U2, "piano") == []
        assert await keys(store, U2, "tomatoes") == ["hobby"]


async def test_prefixes_and_one_letter_typos_are_found(db: Database) -> None:
    store = MemoryStore(db)
    await store.put(U1, "profile", "music", "takes piano lessons", SOURCE, cap=None)
    await store.put(U1, "profile", "travel", "flies to oslo in june", SOURCE, cap=None)
    assert await keys(store, U1, "lesson") == ["music"]  # a word it begins
    assert await keys(store, U1, "pinao") == ["music"]  # swapped letters: no trigram shared
    assert await keys(store, U1, "olso") == ["travel"]
    assert await keys(store, U1, "pia") == ["music"]  # too short for typos, a prefix still


def test_discarding_every_entry_leaves_nothing_behind() -> None:
    index = ScopeIndex()
    index.add(1, "profile", "t1", "profile hobby plays the piano 钢琴课")
    index.add(2, "profile", "t2", "profile lesson piano on friday")
    index.add(1, "profile", "t3", "profile hobby chess")  # re-added: replaces
    assert index.words["piano"] == {2}
    index.discard(1)
    index.discard(2)
    assert (index.entries, index.words, index.grams, index.vocabulary, index.near) == (
        {}, {}, {}, [], {},
    )  # fmt: skip
    assert index.postings == 0
