"""Rate events (storage/sql/access/rate_events.py): a limit per kind and key that holds
across concurrent writers and a reopened database, and prunes what left the window."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from storage.database import Database
from storage.sql.access.rate_events import RateLimit
from storage.store import Store
from tests.storage.conftest import OpenStorage

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
TWO_A_MINUTE = RateLimit("test", 2, timedelta(minutes=1))


async def rows(db: Database) -> list[tuple[str, str]]:
    found = await db.read(
        lambda c: c.execute("SELECT kind, key FROM rate_events ORDER BY id").fetchall()
    )
    return [(r["kind"], r["key"]) for r in found]


async def test_a_key_is_full_until_its_oldest_event_leaves_the_window(
    open_storage: OpenStorage,
) -> None:
    async with open_storage() as db:
        rates = Store(db).rates
        assert await rates.take(TWO_A_MINUTE, ["a"], T0) is None
        assert await rates.take(TWO_A_MINUTE, ["a"], T0 + timedelta(seconds=20)) is None
        wait = await rates.take(TWO_A_MINUTE, ["a"], T0 + timedelta(seconds=45))
        assert wait == pytest.approx(15.0)
        assert await rates.take(TWO_A_MINUTE, ["b"], T0 + timedelta(seconds=45)) is None
        assert await rates.take(TWO_A_MINUTE, ["a"], T0 + timedelta(seconds=60)) is None


async def test_every_key_must_have_room_and_a_refusal_records_nothing(
    open_storage: OpenStorage,
) -> None:
    async with open_storage() as db:
        rates = Store(db).rates
        await rates.take(TWO_A_MINUTE, ["from:x", "to:c"], T0)
        await rates.take(TWO_A_MINUTE, ["from:y", "to:c"], T0)
        assert await rates.take(TWO_A_MINUTE, ["from:z", "to:c"], T0) == pytest.approx(60.0)
        assert await rows(db) == [("test", k) for k in ("from:x", "to:c", "from:y", "to:c")]


async def test_concurrent_takes_never_pass_the_limit_together(open_storage: OpenStorage) -> None:
    async with open_storage() as db:
        rates = Store(db).rates
        outcomes = await asyncio.gather(*(rates.take(TWO_A_MINUTE, ["k"], T0) for _ in range(8)))
    assert outcomes.count(None) == 2


async def test_the_count_survives_reopening_the_database(open_storage: OpenStorage) -> None:
    async with open_storage() as db:
        await Store(db).rates.take(TWO_A_MINUTE, ["k"], T0)
        await Store(db).rates.take(TWO_A_MINUTE, ["k"], T0)
    async with open_storage() as db:
        assert await Store(db).rates.take(TWO_A_MINUTE, ["k"], T0) is not None


async def test_old_events_are_pruned_and_a_give_back_undoes_one_take(
    open_storage: OpenStorage,
) -> None:
    hourly = RateLimit("other", 1, timedelta(hours=1))
    async with open_storage() as db:
        rates = Store(db).rates
        for n in range(5):
            await rates.take(TWO_A_MINUTE, [f"k{n}"], T0)
        await rates.take(hourly, ["h"], T0)
        await rates.take(TWO_A_MINUTE, ["late"], T0 + timedelta(minutes=2))
        assert await rows(db) == [("other", "h"), ("test", "late")]  # the hour is not over
        later = T0 + timedelta(minutes=3)
        await rates.take(hourly, ["h2"], later)
        await rates.give_back(hourly, ["h2"], later)
        assert await rates.take(hourly, ["h2"], later) is None
        assert await rates.take(hourly, ["h2"], later) is not None


async def test_take_each_takes_every_limit_or_none(open_storage: OpenStorage) -> None:
    """A minute's and an hour's rate in one transaction: over the hour's, the
    minute's event just taken is given back."""
    minute = RateLimit("minute", 5, timedelta(minutes=1))
    hour = RateLimit("hour", 2, timedelta(hours=1))
    async with open_storage() as db:
        rates = Store(db).rates
        assert await rates.take_each([minute, hour], ["s"], T0) is None
        assert await rates.take_each([minute, hour], ["s"], T0 + timedelta(seconds=1)) is None
        over = await rates.take_each([minute, hour], ["s"], T0 + timedelta(seconds=2))
        assert over == (hour, pytest.approx(3598.0))
        assert await rows(db) == [("minute", "s"), ("hour", "s")] * 2
