"""`storage.copy`: a home moves between SQLite and PostgreSQL whole, or not at all."""

from __future__ import annotations

import asyncio
import io
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from agent.messages import ChatMessage, Role, ToolCall
from gateway.bus import OutboundMessage
from gateway.cli.backup import run_backup, run_restore
from storage.backends import open_database
from storage.copy import CopyError, TargetNotEmpty, copy_storage
from storage.database import Connection
from storage.errors import SchemaTooNew
from storage.sql import jobs
from storage.sql.access import pairings
from storage.sql.conversations import messages, sessions
from storage.sql.delivery import dead_letters, outbox
from storage.sql.memory.memories import Provenance, Scope, list_memories, put_memory
from storage.sqlite.migrations import MIGRATIONS

pytestmark = pytest.mark.postgres

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
U1 = Scope("user", "telegram:u1")
RULES = pairings.CodeRules(
    ttl=timedelta(minutes=10), reissue_after=timedelta(hours=1), max_pending=3
)
CALL = ToolCall("t1", "read", '{"path": "a.txt"}')
HISTORY = [
    ChatMessage.user("hello 你好"),
    ChatMessage(Role.ASSISTANT, "", tool_calls=(CALL,), reasoning_content="think"),
    ChatMessage.tool_result(CALL, "100% of the file"),
    ChatMessage(Role.ASSISTANT, "done"),
]
JOB = jobs.JobRecord(
    id="daily",
    source=jobs.JobSource.RUNTIME,
    kind="agent_task",
    definition={"id": "daily", "kind": "agent_task", "prompt": "summarise"},
    enabled=True,
    paused=False,
    overlap_policy="skip",
    next_run_at=T0 + timedelta(days=1),
    run_requested_at=None,
    created_at=T0,
    updated_at=T0,
    owner=jobs.JobOwner("telegram", "u1"),
)


def fill(c: Connection) -> None:
    """A small home: every kind of row the tables hold, through storage/sql."""
    sessions.create_session(c, "telegram", "42", "telegram:42")
    messages.append_messages(c, "telegram:42", HISTORY, run_id="run-1")
    put_memory(c, U1, "tasks", "lesson", "piano on Saturdays", Provenance("agent"), cap=None)
    put_memory(c, U1, "facts", "city", "Lisbon", Provenance("user"), cap=None)
    jobs.save_job(c, JOB)
    jobs.insert_run(c, "daily", T0, jobs.RunCause.SCHEDULE, jobs.RunStatus.SUCCEEDED, T0)
    outbox.enqueue(c, OutboundMessage("telegram", "42", "pending reply", metadata={"k": "v"}))
    pairings.issue_code(
        c, channel="telegram", sender_id="u2", chat_id="7", make_code=lambda: "ABC123",
        now=T0, rules=RULES,
    )  # fmt: skip
    dead_letters.record(c, "telegram", "p-1", b"\xffnot utf-8", "undecodable")


class _WithCursor:
    """Workaround: storage.sql.conversations.messages.plain_rows calls
    `conn.cursor()`, which PgConnection does not offer (yet); this gives it one."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    def cursor(self) -> _PlainCursor:
        return _PlainCursor(self._conn)


class _PlainCursor:
    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def execute(self, sql: str, args: Any = ()) -> Any:
        cursor = self._conn.execute(sql, args)
        cursor.row_factory = None
        return cursor

    def close(self) -> None:
        pass


def history_of(c: Connection) -> list[ChatMessage]:
    conn: Any = c if hasattr(c, "cursor") else _WithCursor(c)
    return messages.load_active_history(conn, "telegram:42")


def table_rows(c: Connection) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, as plain tuples, in a fixed order."""
    names = [
        "sessions", "chat_bindings", "messages", "outbox", "scheduler_jobs", "job_runs",
        "pairings", "dead_letters", "memories", "memory_scopes", "memory_audit",
    ]  # fmt: skip
    return {
        name: sorted(tuple(row) for row in c.execute(f"SELECT * FROM {name}").fetchall())
        for name in names
    }


def snapshot(c: Connection) -> dict[str, Any]:
    """What the runtime reads back, through the same functions on both backends."""
    return {
        "tables": table_rows(c),
        "history": history_of(c),
        "session": sessions.active_session(c, "telegram", "42"),
        "memories": list_memories(c, U1, None),
        "job": jobs.get_job(c, "daily"),
        "runs": jobs.list_runs(c, "daily"),
        "outbox": outbox.scan(c, "telegram", "9999").due,
        "pairings": pairings.list_pairings(c, T0),
        # not dead_letters.recent: its `? IS NULL` fails on PostgreSQL (untyped parameter)
        "dead_letter": dead_letters.get(c, 1),
    }


async def read_home(url: str) -> dict[str, Any]:
    db = open_database(url)
    await db.open()
    try:
        return await db.read(snapshot)
    finally:
        await db.close()


async def make_home(url: str) -> None:
    db = open_database(url)
    await db.open()
    try:
        await db.write(fill)
    finally:
        await db.close()


async def test_a_home_goes_to_postgresql_and_back_unchanged(
    tmp_path: Path, postgres_url: str
) -> None:
    source, back = f"sqlite:///{tmp_path / 'home.db'}", f"sqlite:///{tmp_path / 'back.db'}"
    await make_home(source)
    expected = await read_home(source)

    there = await copy_storage(source, postgres_url, batch_rows=2)  # several batches
    assert there.counts["messages"] == len(HISTORY)
    assert there.counts["job_runs"] == 1
    assert there.total == sum(there.counts.values()) > 0
    assert await read_home(postgres_url) == expected

    home_again = await copy_storage(postgres_url, back)
    assert home_again.counts == there.counts
    assert await read_home(back) == expected


async def test_ids_continue_after_the_copied_ones_on_postgresql(
    tmp_path: Path, postgres_url: str
) -> None:
    source = f"sqlite:///{tmp_path / 'home.db'}"
    await make_home(source)
    await copy_storage(source, postgres_url)
    db = open_database(postgres_url)
    await db.open()
    try:
        new_id = await db.write(
            lambda c: outbox.enqueue(c, OutboundMessage("telegram", "42", "after the move"))
        )
        due = await db.read(lambda c: outbox.scan(c, "telegram", "9999").due)
    finally:
        await db.close()
    assert [row.id for row in due] == [1, new_id]
    assert new_id == 2


async def test_a_target_with_rows_is_refused_and_left_as_it_was(
    tmp_path: Path, postgres_url: str
) -> None:
    source = f"sqlite:///{tmp_path / 'home.db'}"
    await make_home(source)
    target = open_database(postgres_url)
    await target.open()
    try:
        await target.write(lambda c: sessions.create_session(c, "websocket", "x", "websocket:x"))
    finally:
        await target.close()

    with pytest.raises(TargetNotEmpty, match="table sessions has rows"):
        await copy_storage(source, postgres_url)
    with pytest.raises(TargetNotEmpty, match="table dead_letters has rows"):  # the other way
        await copy_storage(postgres_url, source)

    raw = psycopg.connect(postgres_url)
    try:
        rows = raw.execute("SELECT id FROM sessions").fetchall()
        messages_there = raw.execute("SELECT count(*) FROM messages").fetchone()
    finally:
        raw.close()
    assert rows == [("websocket:x",)]
    assert messages_there == (0,)


async def test_a_source_newer_than_this_picobot_is_refused(
    tmp_path: Path, postgres_url: str
) -> None:
    path = tmp_path / "future.db"
    await make_home(f"sqlite:///{path}")
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version={len(MIGRATIONS) + 1}")
    conn.close()
    with pytest.raises(SchemaTooNew):
        await copy_storage(f"sqlite:///{path}", postgres_url)


async def test_a_missing_source_file_is_refused_not_created(
    tmp_path: Path, postgres_url: str
) -> None:
    missing = tmp_path / "nothing.db"
    with pytest.raises(CopyError, match="does not exist"):
        await copy_storage(f"sqlite:///{missing}", postgres_url)
    assert not missing.exists()


async def test_backup_and_restore_on_postgresql_round_trip(
    tmp_path: Path, postgres_url: str, postgres_server: Any
) -> None:
    # built on SQLite and copied over: put_memory's upsert fails on PostgreSQL
    # (`revision = revision + 1`: column reference "revision" is ambiguous)
    built = tmp_path / "built" / "home.db"
    await make_home(f"sqlite:///{built}")
    await copy_storage(f"sqlite:///{built}", postgres_url)
    expected = await read_home(postgres_url)
    dest = tmp_path / "backups"
    dest.mkdir()
    out = io.StringIO()
    assert await run_backup(postgres_url, dest, out=out) == 0
    [backup] = list(dest.iterdir())  # one file, no WAL beside it
    assert backup.name.startswith("picobot-")
    assert backup.stat().st_mode & 0o777 == 0o600
    assert await read_home(f"sqlite:///{backup}") == expected
    assert "messages: 4 rows" in out.getvalue()

    # into a fresh database: no --force needed
    fresh = postgres_server.new_database()
    assert await restore_and_report(backup, fresh, force=False) == 0
    assert await read_home(fresh) == expected

    # over the live one: refused without --force, replaced with it
    await make_more(postgres_url)
    assert await restore_and_report(backup, postgres_url, force=False) == 1
    assert await restore_and_report(backup, postgres_url, force=True) == 0
    assert await read_home(postgres_url) == expected


async def make_more(url: str) -> None:
    db = open_database(url)
    await db.open()
    try:
        await db.write(lambda c: sessions.create_session(c, "websocket", "y", "websocket:y"))
    finally:
        await db.close()


async def restore_and_report(backup: Path, url: str, *, force: bool) -> int:
    """`picobot restore` on PostgreSQL; it runs its own event loop, so in a thread."""
    return await asyncio.to_thread(run_restore, backup, url, force=force, out=io.StringIO())
