"""What an operator does to delivery (storage.units.delivery, the console and
the CLI), on every backend: an outbox row given up for good (`discarded`:
counted, listed, never sent, gone with retention), the outbox by state, and
dead letters recorded again in the inbox or discarded."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta

import pytest

from gateway.bus import InboundMessage, OutboundMessage
from storage.clock import iso
from storage.sql.delivery import dead_letters, inbox, outbox
from storage.sql.delivery.outbox import OutboxState
from storage.sql.retention import RetainedTable, prune_batch
from storage.store import Store
from tests.storage.conftest import OpenStorage

OLD = iso(datetime.now(UTC) - timedelta(days=40))


def _row(c: sqlite3.Connection, text: str, state: str, *, old: bool = False) -> int:
    row_id = outbox.enqueue(c, OutboundMessage("rec", "c1", text))
    c.execute(
        "UPDATE outbox SET state = ?, created_at = COALESCE(?, created_at), "
        "sent_at = CASE WHEN ? = 'sent' THEN created_at END WHERE id = ?",
        (state, OLD if old else None, state, row_id),
    )
    return row_id


def _states(c: sqlite3.Connection) -> dict[int, str]:
    return {r[0]: r[1] for r in c.execute("SELECT id, state FROM outbox ORDER BY id")}


async def test_a_failed_or_parked_row_is_discarded_counted_and_never_due(
    open_storage: OpenStorage,
) -> None:
    async with open_storage() as db:
        store = Store(db)

        def rows(c: sqlite3.Connection) -> list[int]:
            return [
                _row(c, "gone", "failed"),
                _row(c, "away", "parked"),
                _row(c, "waiting", "pending"),
                _row(c, "done", "sent"),
                _row(c, "also done", "sent"),
            ]

        failed, parked, pending, sent, _ = await db.write(rows)
        assert await store.delivery.discard_outbox(failed) == "rec"
        assert await store.delivery.discard_outbox(parked) == "rec"
        for not_open in (failed, pending, sent, 999):  # discarded already, open, sent, none
            assert await store.delivery.discard_outbox(not_open) is None
        states = await db.read(_states)
        counts = await store.outbox_counts()
        due = await db.read(lambda c: outbox.due_rows(c, "rec", iso(datetime.now(UTC))))
        unsent = await store.outbox_rows()
        by_state = {s: [r.id for r in await store.delivery.outbox_in_state(s)] for s in OutboxState}
        # the CLI's retry does not bring a discarded row back
        assert await store.retry_outbox(failed) is None
    assert states[failed] == states[parked] == "discarded"
    assert counts == {"discarded": 2, "pending": 1, "sent": 2}
    assert [r.id for r in due] == [pending]
    assert [r.id for r in unsent] == [pending]
    assert by_state == {
        OutboxState.PENDING: [pending],
        OutboxState.PARKED: [],
        OutboxState.FAILED: [],
        OutboxState.SENT: [sent + 1, sent],  # newest first
        OutboxState.DISCARDED: [parked, failed],
    }


async def test_discarded_rows_go_with_retention_and_failed_ones_stay(
    open_storage: OpenStorage,
) -> None:
    async with open_storage() as db:

        def setup(c: sqlite3.Connection) -> tuple[int, int, int]:
            gone = _row(c, "discarded long ago", "failed", old=True)
            kept = _row(c, "given up long ago", "failed", old=True)
            outbox.discard_row(c, gone)
            newest = _row(c, "newest", "failed", old=True)
            outbox.discard_row(c, newest)
            return gone, kept, newest

        gone, kept, newest = await db.write(setup)
        cutoff = datetime.now(UTC) - timedelta(days=30)
        await db.write(lambda c: prune_batch(c, RetainedTable.OUTBOX, cutoff, 0, 100))
        left = await db.read(_states)
    # the newest row stays whatever its state: no id is given twice
    assert left == {kept: "failed", newest: "discarded"}
    assert gone not in left


def _refused(c: sqlite3.Connection, message: InboundMessage) -> int:
    """A message the inbox refused, kept as the inbound processor keeps it."""
    payload = inbox.inbound_to_json(message, ensure_ascii=True)
    return dead_letters.record(c, message.channel, message.message_id, payload, "not recorded: X")


def _inbox(c: sqlite3.Connection) -> list[tuple[int, str, str]]:
    rows = c.execute("SELECT id, platform_id, state FROM inbox ORDER BY id").fetchall()
    return [(r[0], r[1], r[2]) for r in rows]


async def test_a_refused_message_is_recorded_again_and_its_dead_letter_goes(
    open_storage: OpenStorage,
) -> None:
    message = InboundMessage("rec", "c1", "u1", "half \ud83d a pair", "m1")
    async with open_storage() as db:
        store = Store(db)
        letter = await db.write(lambda c: _refused(c, message))
        requeued = await store.delivery.requeue_dead_letter(letter)
        rows = await db.read(_inbox)
        [entry] = await store.unfinished_inbox()
        again = await store.delivery.requeue_dead_letter(letter)
        left = await store.dead_letters(10)
    assert requeued is not None
    assert requeued.inbox_id == rows[0][0]
    assert rows == [(requeued.inbox_id, "m1", "received")]
    # made storable as the bus makes every message
    assert entry.message.text == requeued.message.text == "half \ufffd a pair"
    assert again is None  # gone with the requeue
    assert left == []


async def test_a_message_the_inbox_has_already_only_loses_its_dead_letter(
    open_storage: OpenStorage,
) -> None:
    message = InboundMessage("rec", "c1", "u1", "hello", "m1")
    async with open_storage() as db:
        store = Store(db)
        letter = await db.write(lambda c: (inbox.record_inbound(c, message), _refused(c, message)))
        requeued = await store.delivery.requeue_dead_letter(letter[1])
        rows = await db.read(_inbox)
        left = await store.dead_letters(10)
    assert requeued is not None
    assert requeued.inbox_id is None
    assert [r[0] for r in rows] == [letter[0]]
    assert left == []


async def test_a_row_set_aside_at_start_is_opened_again(open_storage: OpenStorage) -> None:
    message = InboundMessage("rec", "c1", "u1", "hello", "m1")
    async with open_storage() as db:
        store = Store(db)

        def mangled(c: sqlite3.Connection) -> int:
            row = inbox.record_inbound(c, message)
            assert row is not None
            c.execute('UPDATE inbox SET payload = \'{"channel": "rec"\' WHERE id = ?', (row,))
            return row

        row = await db.write(mangled)
        assert await store.set_aside_unreadable_inbox() == [row]
        [letter] = await store.dead_letters(10)
        with pytest.raises(inbox.NotAMessage):  # still unreadable: it stays
            await store.delivery.requeue_dead_letter(letter.id)
        # a picobot that reads it again (the payload fixed by hand, here)
        payload = inbox.inbound_to_json(message, ensure_ascii=True)
        await db.write(
            lambda c: c.execute(
                "UPDATE dead_letters SET payload = ? WHERE id = ?", (payload, letter.id)
            )
        )
        requeued = await store.delivery.requeue_dead_letter(letter.id)
        rows = await db.read(_inbox)
    assert requeued is not None
    assert requeued.inbox_id == row
    assert rows == [(row, "m1", "received")]


async def test_a_raw_platform_event_is_not_recorded_and_can_be_discarded(
    open_storage: OpenStorage,
) -> None:
    async with open_storage() as db:
        store = Store(db)

        def letters(c: sqlite3.Connection) -> tuple[int, int]:
            raw = dead_letters.record(c, "rec", "9", b'{"update_id": 9}', "malformed update")
            big = "x" * (dead_letters.PAYLOAD_MAX_CHARS + 1)
            return raw, dead_letters.record(c, "rec", None, big, "not recorded: X")

        raw, cut = await db.write(letters)
        for letter in (raw, cut):
            with pytest.raises(inbox.NotAMessage, match="can only be discarded"):
                await store.delivery.requeue_dead_letter(letter)
        kept = [d.id for d in await store.dead_letters(10)]
        assert await store.delivery.discard_dead_letter(raw)
        assert not await store.delivery.discard_dead_letter(raw)
        left = [d.id for d in await store.dead_letters(10)]
        rows = await db.read(_inbox)
    assert kept == [cut, raw]
    assert left == [cut]
    assert rows == []
