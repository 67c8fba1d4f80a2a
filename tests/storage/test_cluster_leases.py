"""Workers and leases on PostgreSQL (storage/sql/cluster.py, storage/fence.py,
docs/scale-out.md): who holds a lease, when another may take it, and the fence
that refuses a turn's write once its worker lost the chat."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime

import pytest

from gateway.bus import InboundMessage
from storage.backends import open_database
from storage.database import Connection, Database
from storage.errors import FenceLost
from storage.fence import Fence, fenced
from storage.sql import cluster
from storage.sql import jobs as job_sql
from storage.sql.cluster import WorkerForgotten, chat_key
from storage.store import Store

pytestmark = pytest.mark.postgres

KEY = chat_key("websocket", "chat-1")


@pytest.fixture
async def store(postgres_url: str) -> AsyncIterator[Store]:
    async with open_database(postgres_url) as db:
        yield Store(db)


async def _register(store: Store, worker: str, lease_secs: float = 30.0) -> None:
    await store.cluster.register(
        worker, name=worker, host="h", pid=1, address="127.0.0.1:1", lease_secs=lease_secs
    )


async def _expire(db: Database, worker: str) -> None:
    """The worker went silent past its lease (killed, paused)."""
    await db.write(
        lambda c: c.execute("UPDATE workers SET expires_at = 0 WHERE id = ?", (worker,)).rowcount
    )


async def test_a_free_lease_is_taken_a_live_holders_is_not_and_a_dead_ones_is(
    store: Store,
) -> None:
    await _register(store, "a")
    await _register(store, "b")
    got = await store.cluster.acquire("a", [KEY])
    assert (got[KEY].owner, got[KEY].token) == ("a", 1)
    got = await store.cluster.acquire("b", [KEY])
    assert (got[KEY].owner, got[KEY].token) == ("a", 1)  # a lives: b is told who holds it
    await _expire(store.db, "a")
    got = await store.cluster.acquire("b", [KEY])
    assert (got[KEY].owner, got[KEY].token) == ("b", 2)  # a new token fences a's writes


async def test_a_fenced_write_commits_while_the_lease_holds_and_is_refused_after_a_takeover(
    store: Store,
) -> None:
    db = store.db
    await _register(store, "a")
    await _register(store, "b")
    token = (await store.cluster.acquire("a", [KEY]))[KEY].token

    def mark(value: str) -> Callable[[Connection], object]:
        return lambda c: c.execute(
            "INSERT INTO channel_state (channel, key, value, updated_at) VALUES ('t', ?, 'x', 'now')",
            (value,),
        ).fetchall()

    with fenced(Fence(KEY, "a", token)):
        await db.write(mark("before"))
    await _expire(db, "a")
    await store.cluster.acquire("b", [KEY])
    with fenced(Fence(KEY, "a", token)):
        late = db.write(mark("late"))
        with pytest.raises(FenceLost):
            await late
    # a write beside it in the same commit (no fence) is not lost with it
    with fenced(Fence(KEY, "a", token)):
        refused = asyncio.ensure_future(db.write(mark("late-again")))
    unfenced = asyncio.ensure_future(db.write(mark("beside")))
    with pytest.raises(FenceLost):
        await refused
    await unfenced
    keys = await db.read(lambda c: sorted(r[0] for r in c.execute("SELECT key FROM channel_state")))
    assert keys == ["before", "beside"]
    assert db.write_failure is None  # a refused fence is no storage failure


async def test_an_expired_worker_cannot_write_even_before_anyone_takes_its_chat(
    store: Store,
) -> None:
    await _register(store, "a")
    token = (await store.cluster.acquire("a", [KEY]))[KEY].token
    await _expire(store.db, "a")
    with fenced(Fence(KEY, "a", token)), pytest.raises(FenceLost):
        await store.db.write(lambda c: c.execute("SELECT 1").fetchall())
    # its heartbeat renews the row: nobody took the chat, so the lease holds again
    beat = await store.cluster.heartbeat("a", 30.0)
    assert beat.lapsed
    assert beat.held == {KEY: token}
    with fenced(Fence(KEY, "a", token)):
        await store.db.write(lambda c: c.execute("SELECT 1").fetchall())


async def test_the_heartbeat_reports_leases_gone_and_a_forgotten_worker(store: Store) -> None:
    await _register(store, "a")
    await _register(store, "b")
    await store.cluster.acquire("a", [KEY, "channel:telegram"])
    await _expire(store.db, "a")
    await store.cluster.acquire("b", [KEY])
    beat = await store.cluster.heartbeat("a", 30.0)
    assert beat.lapsed
    assert beat.held == {"channel:telegram": 1}  # the chat went to b meanwhile
    fresh = await store.cluster.heartbeat("a", 30.0)
    assert not fresh.lapsed
    await store.db.write(lambda c: c.execute("DELETE FROM workers WHERE id = 'a'").rowcount)
    with pytest.raises(WorkerForgotten):
        await store.cluster.heartbeat("a", 30.0)


async def test_a_clean_leave_frees_every_lease_at_once(store: Store) -> None:
    await _register(store, "a")
    await _register(store, "b")
    await store.cluster.acquire("a", [KEY, "channel:telegram"])
    assert await store.cluster.leave("a") == 2
    got = await store.cluster.acquire("b", [KEY, "channel:telegram"])
    assert {k: h.owner for k, h in got.items()} == {KEY: "b", "channel:telegram": "b"}
    rows, _ = await store.cluster.workers()
    assert [w.id for w in rows] == ["b"]


async def test_orphaned_chats_are_those_of_dead_holders_and_old_unleased_rows(
    store: Store,
) -> None:
    await _register(store, "a")
    await _register(store, "b")
    for chat in ("held", "dead", "unleased"):
        message = InboundMessage("websocket", chat, "u", "hi", message_id=f"m-{chat}")
        await store.record_inbound([message])
    await store.cluster.acquire("a", [chat_key("websocket", "held")])
    await store.cluster.acquire("b", [chat_key("websocket", "dead")])
    await _expire(store.db, "b")
    assert await store.cluster.orphaned_chats(older_than_secs=60) == [("websocket", "dead")]
    orphans = await store.cluster.orphaned_chats(older_than_secs=0)
    assert sorted(orphans) == [("websocket", "dead"), ("websocket", "unleased")]
    entries = await store.cluster.unfinished_of_chats([("websocket", "dead")])
    assert [e.message.message_id for e in entries] == ["m-dead"]
    by_id = await store.cluster.unfinished_by_id([e.id for e in entries] + [10_000])
    assert [e.id for e in by_id] == [e.id for e in entries]


async def test_a_dead_workers_unfinished_runs_are_adopted_once(store: Store) -> None:
    await _register(store, "a")
    await _register(store, "b")
    now = datetime.now(UTC)
    await store.db.write(
        lambda c: (
            c.execute(
                "INSERT INTO scheduler_jobs (id, source, kind, definition, created_at, updated_at) "
                "VALUES ('j', 'config', 'agent_task', '{}', ?, ?)",
                (job_sql.to_db_time(now), job_sql.to_db_time(now)),
            ).rowcount
        )
    )
    insert = functools.partial(
        job_sql.insert_run,
        job_id="j",
        cause=job_sql.RunCause.SCHEDULE,
        status=job_sql.RunStatus.CLAIMED,
        now=now,
    )
    await store.db.write(lambda c: insert(c, scheduled_at=now, worker="a"))
    await store.db.write(lambda c: insert(c, scheduled_at=now.replace(year=2030), worker="b"))
    assert await store.db.write(lambda c: job_sql.adopt_runs_of_dead_workers(c, "b")) == []
    await _expire(store.db, "a")
    adopted = await store.db.write(lambda c: job_sql.adopt_runs_of_dead_workers(c, "b"))
    assert [r.job_id for r in adopted] == ["j"]
    assert await store.db.write(lambda c: job_sql.adopt_runs_of_dead_workers(c, "b")) == []


async def test_parking_leaves_a_row_another_worker_sent_as_sent(store: Store) -> None:
    from gateway.bus import OutboundMessage
    from storage.sql.delivery import outbox

    row = await store.enqueue(OutboundMessage("websocket", "c", "hi"))
    await store.mark_sent(row)
    await store.park(row, "no recipient connected to this worker")
    states = await store.db.read(
        lambda c: [r[0] for r in c.execute("SELECT state FROM outbox WHERE id = ?", (row,))]
    )
    assert states == [outbox.OutboxState.SENT.value]


def test_keys_name_their_chat_and_channel() -> None:
    assert chat_key("telegram", "42:7") == "chat:telegram:42:7"
    assert cluster.channel_key("telegram") == "channel:telegram"


async def test_a_lease_held_by_a_write_in_flight_is_skipped_not_waited_for(
    store: Store, postgres_url: str
) -> None:
    """A worker paused in the middle of a fenced write keeps the lease row
    locked: taking the lease over must not stall the taker's writer behind it."""
    import psycopg

    await _register(store, "a")
    await _register(store, "b")
    token = (await store.cluster.acquire("a", [KEY]))[KEY].token
    await _expire(store.db, "a")
    with psycopg.connect(postgres_url) as paused:  # a's write, stopped before its commit
        paused.execute("SELECT 1 FROM leases WHERE key = %s FOR SHARE", (KEY,))
        async with asyncio.timeout(10):  # a wait here would be the bug
            got = await store.cluster.acquire("b", [KEY])
        assert (got[KEY].owner, got[KEY].token) == ("a", token)  # not taken: tried again later
        paused.rollback()
    got = await store.cluster.acquire("b", [KEY])
    assert (got[KEY].owner, got[KEY].token) == ("b", token + 1)
