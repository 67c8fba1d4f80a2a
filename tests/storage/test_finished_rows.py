"""What the frequent, start-up and operator-page reads of the outbox, inbox
and approvals cost does not grow with the finished rows they keep
(`storage.retention_days`, 30 days of every message by default). Counted in
SQLite's virtual-machine steps, not timed."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from gateway.bus import InboundMessage
from storage.sql import approvals
from storage.sql.delivery import inbox, outbox
from storage.sqlite.db import Database

_STEPS_PER_CALL = 10  # the progress handler runs every this many VM instructions
_FEW, _MANY = 100, 20_000


def _message(text: str) -> InboundMessage:
    return InboundMessage("wechat", "chat-7", "u1", text, f"m-{text}")


def _outbox_rows(conn: sqlite3.Connection, finished: int) -> None:
    """`finished` sent rows over 50 other chats, then chat-7's parked row,
    two pending rows and a failed one."""
    rows = [(f"chat-{100 + n % 50}", "sent", f"sent-{n}") for n in range(finished)]
    rows += [
        ("chat-7", "parked", "parked"),
        ("chat-8", "pending", "pending-1"),
        ("chat-9", "pending", "pending-2"),
        ("chat-10", "failed", "failed"),
    ]
    conn.executemany(
        "INSERT INTO outbox (channel, chat_id, text, state, created_at, idempotency_key) "
        "VALUES ('wechat', ?, 'a reply', ?, '2026-12-01T00:00:00+00:00', ?)",
        rows,
    )


def _inbox_rows(conn: sqlite3.Connection, finished: int) -> None:
    """`finished` done rows, then two received ones."""
    conn.executemany(
        "INSERT INTO inbox (channel, platform_id, chat_id, sender_id, payload, state, "
        "received_at) VALUES ('wechat', ?, 'chat-1', 'u1', '{}', 'done', '2026-12-01')",
        [(f"done-{n}",) for n in range(finished)],
    )
    inbox.record_inbound(conn, _message("one"))
    inbox.record_inbound(conn, _message("two"))


def _approval_rows(conn: sqlite3.Connection, finished: int) -> None:
    """`finished` decided (done) approvals, then a pending one."""
    rows = [("done", "{}")] * finished + [("pending", inbox.inbound_to_json(_message("rm")))]
    conn.executemany(
        "INSERT INTO approvals (session_id, channel, chat_id, requester, message, inbox_ids, "
        "calls, held, state, created_at, expires_at, updated_at) VALUES ('s', 'wechat', "
        "'chat-7', 'u1', ?, '[]', '[]', '[]', ?, '2026-12-01T00:00:00+00:00', "
        "'2026-12-01T01:00:00+00:00', '2026-12-01T00:00:00+00:00')",
        [(message, state) for state, message in rows],
    )


@dataclass(frozen=True)
class Case:
    fill: Callable[[sqlite3.Connection, int], None]
    work: Callable[[sqlite3.Connection], object]
    check: Callable[[sqlite3.Connection], bool]


CASES = {
    # a WeChat message or a WebSocket connect puts the chat's parked replies back
    "outbox.unpark": Case(
        _outbox_rows,
        lambda c: outbox.unpark(c, "wechat", "chat-7"),
        lambda c: (
            c.execute("SELECT state FROM outbox WHERE idempotency_key = 'parked'").fetchone()[0]
            == "pending"
        ),
    ),
    # every metrics scrape
    "outbox.unsent_counts": Case(
        _outbox_rows,
        outbox.unsent_counts,
        lambda c: outbox.unsent_counts(c) == {"pending": 2, "parked": 1, "failed": 1},
    ),
    # the web UI's operator page, each time it is opened or refreshed
    "outbox.list_rows": Case(
        _outbox_rows,
        outbox.list_rows,
        lambda c: (
            [r.idempotency_key for r in outbox.list_rows(c)]
            == ["parked", "pending-1", "pending-2", "failed"]
        ),
    ),
    "outbox.list_rows, failed only": Case(
        _outbox_rows,
        lambda c: outbox.list_rows(c, failed_only=True),
        lambda c: [r.idempotency_key for r in outbox.list_rows(c, failed_only=True)] == ["failed"],
    ),
    "outbox.outbox_counts": Case(
        _outbox_rows,
        outbox.outbox_counts,
        lambda c: (
            outbox.outbox_counts(c)
            == {
                "failed": 1,
                "parked": 1,
                "pending": 2,
                "sent": c.execute("SELECT COUNT(*) FROM outbox WHERE state = 'sent'").fetchone()[0],
            }
        ),
    ),
    # every start
    "inbox.unfinished_entries": Case(
        _inbox_rows,
        inbox.unfinished_entries,
        lambda c: [e.message.text for e in inbox.unfinished_entries(c)] == ["one", "two"],
    ),
    "approvals.open_approvals": Case(
        _approval_rows,
        approvals.open_approvals,
        lambda c: [a.message.text for a in approvals.open_approvals(c)] == ["rm"],
    ),
}


def _steps(conn: sqlite3.Connection, work: Callable[[sqlite3.Connection], object]) -> int:
    calls = 0

    def count() -> int:
        nonlocal calls
        calls += 1
        return 0  # go on

    conn.set_progress_handler(count, _STEPS_PER_CALL)
    try:
        work(conn)
    finally:
        conn.set_progress_handler(None, 0)
    return calls * _STEPS_PER_CALL


async def _filled(
    path: Path, fill: Callable[[sqlite3.Connection, int], None], finished: int
) -> sqlite3.Connection:
    async with Database(path) as db:
        await db.write(lambda c: fill(c, finished))
    conn = sqlite3.connect(path, isolation_level=None)
    conn.row_factory = sqlite3.Row
    return conn


@pytest.mark.parametrize("name", CASES)
async def test_a_frequent_read_does_not_walk_the_finished_rows(tmp_path: Path, name: str) -> None:
    case = CASES[name]
    few = await _filled(tmp_path / "few.sqlite", case.fill, _FEW)
    many = await _filled(tmp_path / "many.sqlite", case.fill, _MANY)
    try:
        steps = {_FEW: _steps(few, case.work), _MANY: _steps(many, case.work)}
        assert case.check(few)
        assert case.check(many)
    finally:
        few.close()
        many.close()
    # a walk past the finished rows takes ≥ 200 × the steps; a search in
    # an index takes a few more for a deeper tree
    assert steps[_MANY] <= steps[_FEW] + 100, steps
