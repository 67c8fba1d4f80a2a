"""Retention's batches (storage.sql.retention): finished rows past the cutoff go,
open ones and the newest row of each table stay; channel state written for an
outbox row goes once that row is delivered or gone."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from gateway.bus import InboundMessage, MediaKind, MediaRef, OutboundMessage
from storage.backends import open_database
from storage.clock import iso
from storage.sql import skill_events
from storage.sql.delivery import channel_state, dead_letters, inbox, outbox
from storage.sql.retention import (
    YOUNG_RUN,
    RetainedTable,
    RowRef,
    prune_batch,
    prune_row_state_batch,
    row_of_state_key,
    unfinished_media,
)
from storage.sql.skill_events import SkillEventRow
from storage.url import sqlite_path_of

NOW = datetime.now(UTC)
CUTOFF = NOW - timedelta(days=30)
OLD = iso(NOW - timedelta(days=40))
KEY = "0123456789abcdef0123456789abcdef"


@pytest.fixture
def conn(storage_url: str) -> Iterator[sqlite3.Connection]:
    """The real schema, on a plain connection in autocommit (each statement its
    own transaction): these are synchronous functions."""

    async def migrate() -> None:
        async with open_database(storage_url):
            pass

    asyncio.run(migrate())
    connection = _plain_connection(storage_url)
    yield connection
    connection.close()


def _plain_connection(url: str) -> sqlite3.Connection:
    """sqlite3's own, or the PostgreSQL connection storage/sql/ runs on."""
    if url.startswith("postgresql://"):
        from storage.postgres.connection import PgConnection
        from storage.postgres.db import connect

        return PgConnection(connect(url))  # type: ignore[return-value]  # the sqlite3 subset
    connection = sqlite3.connect(sqlite_path_of(url), isolation_level=None)
    connection.row_factory = sqlite3.Row
    return connection


def prune_all(conn: sqlite3.Connection, table: RetainedTable, limit: int = 2) -> int:
    """Batches until the table says nothing is left, as the service does."""
    deleted, after = 0, 0
    while True:
        batch = prune_batch(conn, table, CUTOFF, after, limit)
        deleted += batch.deleted
        if batch.resume_after is None:
            return deleted
        after = batch.resume_after


def ids(conn: sqlite3.Connection, table: str) -> list[int]:
    return [r[0] for r in conn.execute(f"SELECT id FROM {table} ORDER BY id")]


def queued(conn: sqlite3.Connection, state: str, *, old: bool, key: str | None = None) -> int:
    message = OutboundMessage("feishu", "oc_1", state)
    if key is not None:
        message = OutboundMessage("feishu", "oc_1", state, idempotency_key=key)
    row_id = outbox.enqueue(conn, message)
    stamp = OLD if old else iso(NOW)
    conn.execute(
        "UPDATE outbox SET state = ?, created_at = ?, sent_at = CASE WHEN ? = 'sent' "
        "THEN ? END WHERE id = ?",
        (state, stamp, state, stamp, row_id),
    )
    return row_id


def test_delivered_rows_past_the_cutoff_go_and_open_and_given_up_ones_stay(
    conn: sqlite3.Connection,
) -> None:
    sent_old = queued(conn, "sent", old=True)
    failed_old = queued(conn, "failed", old=True)
    pending_old = queued(conn, "pending", old=True)
    parked_old = queued(conn, "parked", old=True)
    sent_old_2 = queued(conn, "sent", old=True)
    sent_new = queued(conn, "sent", old=False)
    newest = queued(conn, "pending", old=False)
    assert prune_all(conn, RetainedTable.OUTBOX) == 2
    # a given-up reply waits for `picobot outbox retry`, however old
    assert ids(conn, "outbox") == [failed_old, pending_old, parked_old, sent_new, newest]
    assert {sent_old, sent_old_2}.isdisjoint(ids(conn, "outbox"))


def test_the_newest_row_stays_so_no_id_is_ever_given_twice(conn: sqlite3.Connection) -> None:
    first = queued(conn, "sent", old=True)
    last = queued(conn, "sent", old=True)
    assert prune_all(conn, RetainedTable.OUTBOX) == 1
    assert ids(conn, "outbox") == [last]
    assert queued(conn, "pending", old=False) == last + 1 != first


def test_the_walk_ends_after_a_run_of_rows_written_after_the_cutoff(
    conn: sqlite3.Connection,
) -> None:
    queued(conn, "sent", old=True)
    for _ in range(YOUNG_RUN + 20):
        queued(conn, "sent", old=False)
    batch = prune_batch(conn, RetainedTable.OUTBOX, CUTOFF, 0, YOUNG_RUN + 10)
    assert batch.deleted == 1
    assert batch.resume_after is None  # a full batch, yet the recent rows behind are not read


def received(conn: sqlite3.Connection, message_id: str, *media: MediaRef) -> int:
    row = inbox.record_inbound(
        conn, InboundMessage("telegram", "42", "7", "hi", message_id, media=media)
    )
    assert row is not None
    return row


def test_finished_inbox_rows_past_the_cutoff_go_and_unfinished_ones_stay(
    conn: sqlite3.Connection,
) -> None:
    done, waiting, recent, last = (received(conn, n) for n in "1234")
    inbox.mark_done(conn, [done, recent])
    conn.execute(
        "UPDATE inbox SET received_at = ?, finished_at = CASE WHEN id = ? THEN ? "
        "ELSE finished_at END WHERE id IN (?, ?)",
        (OLD, done, OLD, done, waiting),
    )
    assert prune_all(conn, RetainedTable.INBOX) == 1
    assert ids(conn, "inbox") == [waiting, recent, last]


def test_old_dead_letters_and_skill_events_go(conn: sqlite3.Connection) -> None:
    for n in range(3):
        dead_letters.record(conn, "telegram", str(n), "{}", "bad")
    skill_events.record(conn, rows=[SkillEventRow("discovered", f"s{n}") for n in range(3)])
    conn.execute("UPDATE dead_letters SET created_at = ? WHERE id < 3", (OLD,))
    conn.execute("UPDATE skill_events SET created_at = ?", (OLD,))
    assert prune_all(conn, RetainedTable.DEAD_LETTERS) == 2
    assert prune_all(conn, RetainedTable.SKILL_EVENTS) == 2  # the newest stays
    assert ids(conn, "dead_letters") == [3]
    assert ids(conn, "skill_events") == [3]


def approval(conn: sqlite3.Connection, state: str, updated: str) -> int:
    row = conn.execute(
        "INSERT INTO approvals (session_id, channel, chat_id, requester, message, inbox_ids, "
        "calls, held, state, created_at, expires_at, updated_at) "
        "VALUES ('s', 'telegram', '42', '7', '{}', '[]', '[]', '[]', ?, ?, ?, ?) RETURNING id",
        (state, OLD, OLD, updated),
    ).fetchone()
    assert row is not None
    return int(row[0])


def test_only_approvals_done_before_the_cutoff_go(conn: sqlite3.Connection) -> None:
    done_old = approval(conn, "done", OLD)
    pending = approval(conn, "pending", OLD)
    done_recently = approval(conn, "done", iso(NOW))
    last = approval(conn, "done", OLD)
    assert prune_all(conn, RetainedTable.APPROVALS) == 1
    assert done_old not in ids(conn, "approvals")
    assert ids(conn, "approvals") == [pending, done_recently, last]


@pytest.mark.parametrize(
    ("key", "ref"),
    [
        ("progress:17", RowRef(outbox_id=17)),  # Telegram
        (f"upload:{KEY}:2", RowRef(idempotency_key=KEY)),  # Feishu
        (f"streamed:{KEY}", RowRef(idempotency_key=KEY)),  # Feishu
        (f"upload:picobot-{KEY}-0", RowRef(idempotency_key=KEY)),  # WeChat
        ("offset", None),
        ("migrated:-5", None),
        ("context_token:alice", None),
        ("progress:abc", None),
        ("upload:short", None),
    ],
)
def test_a_state_key_names_its_outbox_row(key: str, ref: RowRef | None) -> None:
    assert row_of_state_key(key) == ref


def prune_state(conn: sqlite3.Connection) -> int:
    deleted, after = 0, ("", "")
    while True:
        batch = prune_row_state_batch(conn, after, 2)
        deleted += batch.deleted
        if batch.resume_after is None:
            return deleted
        after = batch.resume_after


def keys(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT key FROM channel_state")}


def test_state_of_a_delivered_or_gone_row_goes_and_of_an_open_one_stays(
    conn: sqlite3.Connection,
) -> None:
    sent_key, pending_key, failed_key, gone_key = (f"{n:x}" * 32 for n in range(10, 14))
    sent = queued(conn, "sent", old=False, key=sent_key)
    pending = queued(conn, "pending", old=False, key=pending_key)
    queued(conn, "failed", old=False, key=failed_key)
    own = {"offset", "migrated:-5", "context_token:alice"}
    for key in own:
        channel_state.set_state(conn, "telegram", key, "x")
    row_keys = {
        "sent": {f"upload:{sent_key}:0", f"streamed:{sent_key}", f"progress:{sent}"},
        "pending": {f"upload:picobot-{pending_key}-1", f"progress:{pending}"},
        "failed": {f"upload:{failed_key}:0"},
        "gone": {f"upload:{gone_key}:0", "progress:999"},
    }
    for group in row_keys.values():
        for key in group:
            channel_state.set_state(conn, "feishu", key, "v")
    assert prune_state(conn) == 5
    assert keys(conn) == own | row_keys["pending"] | row_keys["failed"]


def test_the_files_of_unfinished_inbox_rows_are_needed(conn: sqlite3.Connection) -> None:
    photo = MediaRef(MediaKind.IMAGE, "/media/telegram/a.jpg")
    voice = MediaRef(MediaKind.AUDIO, "/media/telegram/b.ogg")
    received(conn, "1", photo)
    answered = received(conn, "2", voice)
    inbox.mark_done(conn, [answered])
    assert unfinished_media(conn) == {"/media/telegram/a.jpg"}


def test_the_files_of_a_turn_paused_for_an_approval_are_needed(
    conn: sqlite3.Connection,
) -> None:
    """A paused turn's inbox rows are closed; its message waits in the approval."""
    photo = MediaRef(MediaKind.IMAGE, "/media/telegram/held.jpg")
    row = received(conn, "1", photo)
    (payload,) = conn.execute("SELECT payload FROM inbox WHERE id = ?", (row,)).fetchone()
    inbox.mark_done(conn, [row])
    conn.execute(
        "INSERT INTO approvals (session_id, channel, chat_id, requester, message, inbox_ids, "
        "calls, held, state, created_at, expires_at, updated_at) "
        "VALUES ('s', 'telegram', '42', '7', ?, '[]', '[]', '[]', ?, ?, ?, ?)",
        (payload, "pending", iso(NOW), iso(NOW), iso(NOW)),
    )
    assert unfinished_media(conn) == {"/media/telegram/held.jpg"}
    conn.execute("UPDATE approvals SET state = 'done'")
    assert unfinished_media(conn) == set()


def test_a_row_stamped_ahead_does_not_end_the_walk_before_older_rows(
    conn: sqlite3.Connection,
) -> None:
    """A clock set a year ahead for a moment stamps a row 'young' for a year:
    the old delivered rows written after it must still go."""
    ahead = queued(conn, "sent", old=False)
    conn.execute(
        "UPDATE outbox SET created_at = '2099-01-01T00:00:00+00:00' WHERE id = ?", (ahead,)
    )
    behind = [queued(conn, "sent", old=True) for _ in range(3)]
    newest = queued(conn, "pending", old=False)
    assert prune_all(conn, RetainedTable.OUTBOX) == 3
    assert ids(conn, "outbox") == [ahead, newest]
    assert set(behind).isdisjoint(ids(conn, "outbox"))
