"""Outbox rows of a degraded channel: held until the probe, failed when out of
time, all due again at once when the platform answers; a re-queued row's
give-up clock starts again."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from gateway.bus import OutboundMessage
from storage.database import Database
from storage.sql.delivery import outbox
from tests.storage.conftest import OpenStorage

T_PAST = "2000-01-01T00:00:00.000000+00:00"
T_NOW = "2026-01-01T12:00:00.000000+00:00"
T_PROBE = "2026-01-01T12:05:00.000000+00:00"
T_LATER = "2026-01-01T13:00:00.000000+00:00"


@pytest.fixture
async def db(open_storage: OpenStorage) -> AsyncIterator[Database]:
    async with open_storage() as database:
        yield database


async def _add(db: Database, chat_id: str, channel: str = "tg") -> int:
    message = OutboundMessage(channel=channel, chat_id=chat_id, text=f"to {chat_id}")
    return await db.write(lambda c: outbox.enqueue(c, message))


async def _rows(db: Database) -> list[outbox.OutboxRow]:
    return await db.read(lambda c: outbox.list_rows(c))


async def test_hold_defers_pending_rows_and_fails_those_out_of_time(db: Database) -> None:
    old, fresh, waiting, other = [await _add(db, c) for c in ("a", "b", "c", "d")]
    await _add(db, "e", channel="feishu")
    await db.write(
        lambda c: c.execute("UPDATE outbox SET created_at = ? WHERE id = ?", (T_PAST, old))
    )
    await db.write(lambda c: outbox.reschedule(c, waiting, T_LATER, "rate limited"))
    await db.write(lambda c: outbox.park(c, other, "offline"))

    held = await db.write(lambda c: outbox.hold(c, "tg", T_PROBE, "2020-01-01", "gave up: x"))

    assert held.expired == 1
    assert held.next_due_at == T_PROBE
    by_id = {r.id: r for r in await _rows(db)}
    assert (by_id[old].state, by_id[old].last_error) == (outbox.OutboxState.FAILED, "gave up: x")
    assert by_id[fresh].next_attempt_at == T_PROBE
    assert by_id[waiting].next_attempt_at == T_LATER  # already waiting longer: kept
    assert by_id[other].state is outbox.OutboxState.PARKED
    assert [r.next_attempt_at for r in by_id.values() if r.channel == "feishu"] == [None]


async def test_resume_makes_every_pending_row_of_the_channel_due(db: Database) -> None:
    ids = [await _add(db, c) for c in ("a", "a", "b")]
    await db.write(lambda c: outbox.hold(c, "tg", T_LATER, T_PAST, "unused"))
    assert await db.write(lambda c: outbox.resume(c, "tg")) == 3
    scan = await db.read(lambda c: outbox.scan(c, "tg", T_NOW))
    assert [r.id for r in scan.due] == ids  # oldest first, the chat's order kept
    assert scan.next_due_at is None


async def test_next_due_at_ignores_rows_queued_behind_their_chat(db: Database) -> None:
    first, behind = await _add(db, "a"), await _add(db, "a")
    await db.write(lambda c: outbox.reschedule(c, first, T_LATER, "down"))
    await db.write(lambda c: outbox.reschedule(c, behind, T_PAST, "down"))
    assert await db.read(lambda c: outbox.next_due_at(c, "tg")) == T_LATER


async def test_a_requeued_row_starts_its_give_up_clock_again(db: Database) -> None:
    row_id = await _add(db, "a")
    await db.write(lambda c: c.execute("UPDATE outbox SET created_at = ?", (T_PAST,)))
    await db.write(lambda c: outbox.mark_failed(c, row_id, "gave up"))
    assert await db.write(lambda c: outbox.retry_row(c, row_id))
    [row] = await _rows(db)
    assert row.state is outbox.OutboxState.PENDING
    assert row.created_at == T_PAST  # the reply's age is unchanged
    assert row.requeued_at is not None
    assert row.requeued_at > T_PAST
    assert row.clock_start == row.requeued_at
    held = await db.write(lambda c: outbox.hold(c, "tg", T_PROBE, "2020-01-01", "gave up"))
    assert held.expired == 0
