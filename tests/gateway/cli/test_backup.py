"""Online backup while the gateway writes; offline restore that refuses a database in use."""

from __future__ import annotations

import asyncio
import functools
import io
import itertools
import os
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from gateway.cli.backup import run_backup, run_restore
from storage.sqlite.db import Database
from storage.sqlite.migrations import MIGRATIONS

MESSAGES_PER_SESSION = 3


def insert_session(conn: sqlite3.Connection, n: int) -> None:
    """One write = one session and its messages, in one transaction."""
    now = datetime.now(UTC).isoformat()
    sid = f"test:{n}"
    conn.execute(
        "INSERT INTO sessions (id, channel, chat_id, created_at, updated_at) "
        "VALUES (?, 'test', ?, ?, ?)",
        (sid, str(n), now, now),
    )
    for seq in range(1, MESSAGES_PER_SESSION + 1):
        conn.execute(
            "INSERT INTO messages (session_id, seq, segment, role, content, created_at) "
            "VALUES (?, ?, 0, 'user', ?, ?)",
            (sid, seq, "x" * 2000, now),
        )


def counts(path: Path) -> tuple[int, int, str, int]:
    conn = sqlite3.connect(path)
    try:
        sessions = conn.execute("SELECT count(*) FROM sessions").fetchone()[0]
        messages = conn.execute("SELECT count(*) FROM messages").fetchone()[0]
        integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    finally:
        conn.close()
    return sessions, messages, integrity, version


async def make_db(path: Path, sessions: int) -> None:
    async with Database(path) as db:
        for n in range(sessions):
            await db.write(lambda c, n=n: insert_session(c, n))


async def test_backup_of_a_database_being_written_is_consistent(tmp_path: Path) -> None:
    db_path = tmp_path / "storage" / "sessions.db"
    dest = tmp_path / "backup.db"
    ids = itertools.count()
    async with Database(db_path) as db:
        for _ in range(200):  # enough pages that the copy is not instantaneous
            await db.write(functools.partial(insert_session, n=next(ids)))
        stop = asyncio.Event()

        async def writer() -> None:
            while not stop.is_set():
                await db.write(functools.partial(insert_session, n=next(ids)))

        task = asyncio.create_task(writer(), name="test-writer")
        try:
            out = io.StringIO()
            code = await run_backup(db_path, dest, out=out)
            after_backup = next(ids)
            # The writer was never blocked: it keeps committing after the copy.
            for _ in range(5):
                await db.write(functools.partial(insert_session, n=next(ids)))
        finally:
            stop.set()
            await task

    assert code == 0, out.getvalue()
    sessions, messages, integrity, version = counts(dest)
    assert integrity == "ok"
    assert version == len(MIGRATIONS)
    assert 200 <= sessions <= after_backup
    assert messages == MESSAGES_PER_SESSION * sessions  # no half-copied transaction
    live_sessions, _, _, _ = counts(db_path)
    assert live_sessions > sessions
    report = out.getvalue()
    assert f"sessions: {sessions} rows" in report
    assert f"messages: {messages} rows" in report
    assert dest.stat().st_mode & 0o777 == 0o600
    assert not Path(f"{dest}-wal").exists()  # a self-contained single file
    assert not dest.with_name(dest.name + ".partial").exists()


async def test_backup_into_a_directory_names_the_file(tmp_path: Path) -> None:
    db_path = tmp_path / "sessions.db"
    await make_db(db_path, 2)
    target = tmp_path / "backups"
    target.mkdir()
    assert await run_backup(db_path, target, out=io.StringIO()) == 0
    (written,) = target.iterdir()
    assert written.name.startswith("picobot-")
    assert counts(written)[:2] == (2, 2 * MESSAGES_PER_SESSION)


async def test_backup_refuses_a_missing_database_and_an_existing_destination(
    tmp_path: Path,
) -> None:
    out = io.StringIO()
    assert await run_backup(tmp_path / "nope.db", tmp_path / "b.db", out=out) == 1
    assert "does not exist" in out.getvalue()

    db_path = tmp_path / "sessions.db"
    await make_db(db_path, 1)
    existing = tmp_path / "b.db"
    existing.write_bytes(b"keep me")
    out = io.StringIO()
    assert await run_backup(db_path, existing, out=out) == 1
    assert "already exists" in out.getvalue()
    assert existing.read_bytes() == b"keep me"


async def test_restore_refuses_while_the_gateway_holds_the_database(tmp_path: Path) -> None:
    db_path = tmp_path / "sessions.db"
    backup = tmp_path / "backup.db"
    await make_db(db_path, 3)
    assert await run_backup(db_path, backup, out=io.StringIO()) == 0

    async with Database(db_path) as db:  # a running gateway: open, idle
        await db.write(lambda c: insert_session(c, 99))
        out = io.StringIO()
        code = await asyncio.to_thread(run_restore, backup, db_path, force=False, out=out)
        assert code == 1
        assert "in use" in out.getvalue()
        assert "--force" in out.getvalue()
        assert (
            await db.read(lambda c: c.execute("SELECT count(*) FROM sessions").fetchone()[0]) == 4
        )

    # Gateway stopped: the restore goes through and the extra session is gone.
    out = io.StringIO()
    assert await asyncio.to_thread(run_restore, backup, db_path, force=False, out=out) == 0
    assert counts(db_path)[:3] == (3, 3 * MESSAGES_PER_SESSION, "ok")
    (aside,) = tmp_path.glob("sessions.db.pre-restore-*")
    assert counts(aside)[0] == 4  # the replaced database is kept, WAL content included
    assert str(aside) in out.getvalue()
    assert not Path(f"{db_path}-wal").exists()
    async with Database(db_path) as db:  # the gateway starts on the restored file
        assert (
            await db.read(lambda c: c.execute("SELECT count(*) FROM sessions").fetchone()[0]) == 3
        )


async def test_restore_detects_a_gateway_in_another_process(tmp_path: Path) -> None:
    db_path = tmp_path / "sessions.db"
    backup = tmp_path / "backup.db"
    await make_db(db_path, 2)
    assert await run_backup(db_path, backup, out=io.StringIO()) == 0
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys\n"
            f"c = sqlite3.connect({str(db_path)!r})\n"
            "c.execute('SELECT count(*) FROM sessions').fetchone()\n"
            "print('ready', flush=True)\n"
            "sys.stdin.read()\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert await asyncio.to_thread(holder.stdout.readline) == "ready\n"
        out = io.StringIO()
        assert await asyncio.to_thread(run_restore, backup, db_path, force=False, out=out) == 1
        assert "in use" in out.getvalue()
        # --force overrides the check.
        out = io.StringIO()
        assert await asyncio.to_thread(run_restore, backup, db_path, force=True, out=out) == 0
        assert "warning" in out.getvalue()
    finally:
        assert holder.stdin is not None
        assert holder.stdout is not None
        holder.stdin.close()
        await asyncio.to_thread(holder.wait, 10)
        holder.stdout.close()
    assert counts(db_path)[:3] == (2, 2 * MESSAGES_PER_SESSION, "ok")


def test_restore_refuses_a_damaged_or_newer_backup(tmp_path: Path) -> None:
    db_path = tmp_path / "sessions.db"
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not sqlite" * 100)
    out = io.StringIO()
    assert run_restore(garbage, db_path, force=True, out=out) == 1
    assert "not a usable SQLite database" in out.getvalue()
    assert not db_path.exists()

    newer = tmp_path / "newer.db"
    conn = sqlite3.connect(newer)
    conn.execute(f"PRAGMA user_version={len(MIGRATIONS) + 1}")
    conn.close()
    out = io.StringIO()
    assert run_restore(newer, db_path, force=False, out=out) == 1
    assert "newer" in out.getvalue()
    assert not db_path.exists()


async def test_restore_replaces_a_damaged_current_database(tmp_path: Path) -> None:
    source = tmp_path / "good.db"
    backup = tmp_path / "backup.db"
    await make_db(source, 2)
    assert await run_backup(source, backup, out=io.StringIO()) == 0
    db_path = tmp_path / "sessions.db"
    db_path.write_bytes(b"\x00garbage" * 512)
    out = io.StringIO()
    assert run_restore(backup, db_path, force=False, out=out) == 0, out.getvalue()
    assert counts(db_path)[:3] == (2, 2 * MESSAGES_PER_SESSION, "ok")
    (aside,) = tmp_path.glob("sessions.db.pre-restore-*")
    assert aside.read_bytes() == b"\x00garbage" * 512


async def test_restore_keeps_the_owner_of_the_database(tmp_path: Path) -> None:
    db_path = tmp_path / "sessions.db"
    backup = tmp_path / "backup.db"
    await make_db(db_path, 1)
    assert await run_backup(db_path, backup, out=io.StringIO()) == 0
    if os.geteuid() == 0:
        # An operator restoring as root must not leave a root-owned file for the service.
        expected = (12345, 12346)
        os.chown(db_path, *expected)
    else:
        expected = (os.getuid(), os.getgid())

    assert run_restore(backup, db_path, force=False, out=io.StringIO()) == 0

    restored = db_path.stat()
    assert (restored.st_uid, restored.st_gid) == expected
    (aside,) = tmp_path.glob("sessions.db.pre-restore-*")
    assert (aside.stat().st_uid, aside.stat().st_gid) == expected
    assert restored.st_mode & 0o777 == 0o600


async def test_restore_onto_a_new_machine(tmp_path: Path) -> None:
    source = tmp_path / "old" / "sessions.db"
    backup = tmp_path / "backup.db"
    await make_db(source, 4)
    assert await run_backup(source, backup, out=io.StringIO()) == 0
    db_path = tmp_path / "new-home" / "storage" / "sessions.db"

    out = io.StringIO()
    assert run_restore(backup, db_path, force=False, out=out) == 0

    assert counts(db_path) == (4, 4 * MESSAGES_PER_SESSION, "ok", len(MIGRATIONS))
    assert "previous database" not in out.getvalue()  # there was none to keep
    assert sorted(p.name for p in db_path.parent.iterdir()) == ["sessions.db"]
