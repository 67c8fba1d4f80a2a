"""ApprovalTimeouts: a denial storage refuses is tried again, and the turn
that carries on is queued exactly once (the end to end case, a real SQLite
error: tests/e2e/test_approval_outcomes.py)."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from gateway.approvals.texts import TIMED_OUT_BY
from gateway.approvals.timeouts import ApprovalTimeouts
from gateway.clock import utc_now
from storage.sql.approvals import ApprovalState


@dataclass
class Row:
    id: int
    state: ApprovalState
    decided_by: str | None = None


@dataclass
class FlakyApprovals:
    """`Store.approvals` for one row, whose storage fails the first calls named."""

    row: Row
    fail: list[str] = field(default_factory=list)  # "move" / "get", once each, in order
    reads: asyncio.Event = field(default_factory=asyncio.Event)

    def _maybe_fail(self, name: str) -> None:
        if self.fail and self.fail[0] == name:
            self.fail.pop(0)
            raise sqlite3.OperationalError("disk I/O error")

    async def move(
        self, approval_id: int, leaving: Sequence[ApprovalState], to: ApprovalState, **kw: Any
    ) -> bool:
        self._maybe_fail("move")
        if self.row.state not in leaving:
            return False
        self.row.state, self.row.decided_by = to, kw.get("decided_by")
        return True

    async def get(self, approval_id: int) -> Row:
        self._maybe_fail("get")
        self.reads.set()
        return self.row


@dataclass
class FakeStore:
    approvals: FlakyApprovals


async def sweep(
    approvals: FlakyApprovals, queue: Callable[[Row], None], until: asyncio.Event
) -> None:
    """Run the timeouts with the row's deadline passed until `until` is set."""
    timeouts = ApprovalTimeouts(FakeStore(approvals), queue)  # type: ignore[arg-type]
    timeouts.add(utc_now() - timedelta(seconds=1), approvals.row.id)
    task = asyncio.create_task(timeouts.run(), name="test-approval-timeouts")
    try:
        await asyncio.wait_for(until.wait(), 10)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_denial_written_but_not_read_back_is_queued_by_the_retry() -> None:
    approvals = FlakyApprovals(Row(1, ApprovalState.PENDING), fail=["get"])
    queued: list[Row] = []
    done = asyncio.Event()

    def queue(row: Row) -> None:
        queued.append(row)
        done.set()

    await sweep(approvals, queue, done)
    assert [(r.state, r.decided_by) for r in queued] == [(ApprovalState.DENIED, TIMED_OUT_BY)]


async def test_an_answer_between_a_failed_denial_and_its_retry_wins() -> None:
    approvals = FlakyApprovals(Row(1, ApprovalState.APPROVED), fail=["move"])
    queued: list[Row] = []
    await sweep(approvals, queued.append, approvals.reads)  # the retry reads the row back
    assert queued == []
    assert approvals.row.state is ApprovalState.APPROVED
