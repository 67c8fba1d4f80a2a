"""The timeouts of pending approvals: one task, asleep until the nearest deadline.

At its deadline a pending approval is denied (`TIMED_OUT_BY`) and handed to
`queue`, which puts the turn that carries on into its conversation's queue
(gateway.approvals.service). A person's answer first makes the denial a no-op: every
move is conditional on `pending`. When storage refuses the denial (a full
disk, a locked file) the approval stays pending and is tried again at a
later sweep, backing off, so the chat is not left waiting until the next start.
"""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Callable
from datetime import datetime, timedelta

import structlog

from gateway.approvals.texts import TIMED_OUT_BY
from gateway.clock import Clock, utc_now
from storage.sql.approvals import ApprovalRecord, ApprovalState
from storage.store import Store

__all__ = ["ApprovalTimeouts"]

log = structlog.get_logger(__name__)

# a timeout whose denial storage refused is tried again after 1 s, 2 s, 4 s … at most 1 min
_RETRY_FIRST_SECS = 1.0
_RETRY_MAX_SECS = 60.0


class ApprovalTimeouts:
    def __init__(
        self, store: Store, queue: Callable[[ApprovalRecord], None], clock: Clock = utc_now
    ) -> None:
        self.store = store
        self.queue = queue
        self.clock = clock
        self._heap: list[tuple[datetime, int]] = []  # (deadline, approval id)
        self._failures: dict[int, int] = {}  # approval id → denials storage refused so far
        self._changed = asyncio.Event()

    def add(self, deadline: datetime, approval_id: int) -> None:
        heapq.heappush(self._heap, (deadline, approval_id))
        self._changed.set()

    async def run(self) -> None:
        """Deny each pending approval at its deadline: one task, asleep until
        the nearest deadline or a new request."""
        while True:
            self._changed.clear()
            now = self.clock()
            while self._heap and self._heap[0][0] <= now:
                _, approval_id = heapq.heappop(self._heap)
                await self._time_out(approval_id)
            delay = (self._heap[0][0] - now).total_seconds() if self._heap else None
            try:
                async with asyncio.timeout(delay):
                    await self._changed.wait()
            except TimeoutError:
                pass

    async def _time_out(self, approval_id: int) -> None:
        """Deny it and queue the turn that carries on; when storage fails, try
        again at a later sweep (backing off), so the chat is not left waiting
        until the next start."""
        failures = self._failures.pop(approval_id, 0)
        try:
            moved = await self.store.approvals.move(
                approval_id, [ApprovalState.PENDING], ApprovalState.DENIED,
                approved=False, decided_by=TIMED_OUT_BY,
            )  # fmt: skip
            record = await self.store.approvals.get(approval_id)
        except asyncio.CancelledError:
            raise
        except Exception:
            retry = min(_RETRY_MAX_SECS, _RETRY_FIRST_SECS * 2**failures)
            log.exception("approval_timeout_failed", approval_id=approval_id, retry_secs=retry)
            self._failures[approval_id] = failures + 1
            heapq.heappush(self._heap, (self.clock() + timedelta(seconds=retry), approval_id))
            return
        # a retry queues it too if an earlier try got as far as the denial (only
        # the timeout denies with TIMED_OUT_BY, and a start queues what it finds decided)
        if (
            (moved or failures)
            and record is not None
            and record.state is ApprovalState.DENIED
            and record.decided_by == TIMED_OUT_BY
        ):
            log.info("approval_timed_out", approval_id=approval_id)
            self.queue(record)
