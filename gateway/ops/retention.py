"""Retention: the pass that keeps a gateway running for months from growing
without bound, run a minute after start (or `storage.prune_interval_secs`
after, if that is shorter) and then every `storage.prune_interval_secs`.

One pass, each step on its own (one failing is logged, the others still run):

1. rows finished longer than `storage.retention_days` ago (storage.sql.retention:
   outbox, inbox, dead letters, approvals `done`, skill events), 500 a
   transaction;
2. channel state kept for one outbox row (uploads done, parts delivered, the
   card a reply streamed into), once that row is delivered or gone;
3. the copy `send_file` made for an outbox row, once the row is delivered or
   gone (a given-up row keeps its copy while it stays, for `picobot outbox
   retry`); a copy without a row only after `ORPHAN_GRACE_SECS`: it is made
   just before its row is written;
4. received attachments older than `storage.media_retention_days`, except
   those of an inbox row not finished yet;
5. usage rows older than `limits.usage_retention_days` (storage.sql.spend),
   and budget totals of periods over for two months.

It never deletes sessions, messages or memories: history is kept. File
deletions run in worker threads. One info line per pass gives the counts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path, PurePath
from typing import Final, TypeVar

import structlog

from gateway.clock import Clock, utc_now
from gateway.config.core import StorageConfig
from gateway.lifecycle import cancel_and_wait
from gateway.ops.media_retention import Removed, outbox_copies, received_files, remove_paths
from storage.sql.retention import Pruned, RetainedTable
from storage.store import Store

__all__ = [
    "ORPHAN_GRACE_SECS",
    "PassCounts",
    "RetentionService",
    "RetentionSettings",
]

log = structlog.get_logger(__name__)

ORPHAN_GRACE_SECS: Final = 3600.0
FIRST_PASS_DELAY_SECS: Final = 60.0
TOTALS_KEPT_DAYS: Final = 63  # spend_totals: this month's and last month's stay
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetentionSettings:
    retention_days: float = 30.0  # 0: rows are kept
    media_retention_days: float = 30.0  # 0: received files are kept
    usage_retention_days: float = 400.0  # usage_log rows (limits.usage_retention_days)
    interval_secs: float = 3600.0
    batch: int = 500  # rows a transaction, files a worker-thread call
    # the first pass waits this long after start: not while a restart's
    # recovered turns and first messages are being answered
    first_delay_secs: float = FIRST_PASS_DELAY_SECS

    @classmethod
    def of(cls, storage: StorageConfig, usage_retention_days: float = 400.0) -> RetentionSettings:
        interval = storage.prune_interval_secs
        return cls(
            storage.retention_days,
            storage.media_retention_days,
            usage_retention_days,
            interval,
            first_delay_secs=min(FIRST_PASS_DELAY_SECS, interval),
        )


@dataclass(slots=True)
class PassCounts:
    rows: dict[RetainedTable, int] = field(default_factory=dict)
    channel_state: int = 0
    usage: int = 0
    outbox_files: Removed = field(default_factory=Removed)
    media_files: Removed = field(default_factory=Removed)

    def log_fields(self) -> dict[str, int]:
        return {
            **{str(table): n for table, n in self.rows.items()},
            "channel_state": self.channel_state,
            "usage": self.usage,
            "outbox_files": self.outbox_files.removed,
            "media_files": self.media_files.removed,
            "files_failed": self.outbox_files.failed + self.media_files.failed,
        }


class RetentionService:
    """A `Service` (gateway.lifecycle): its one task runs a pass, then waits."""

    name = "retention"

    def __init__(
        self,
        store: Store,
        media_dir: Path,
        settings: RetentionSettings,
        *,
        clock: Clock = utc_now,
    ) -> None:
        """Received files are aged out under `media_dir` only: a folder an
        operator gave a channel (its own `media_dir`) is theirs, and may hold
        files picobot never wrote, so nothing there is deleted."""
        self._store = store
        self._outbox_dir = media_dir / "outbox"  # gateway.delivery.files
        self._received = [media_dir]
        self.settings = settings
        self._clock = clock
        self._task: asyncio.Task[None] | None = None
        self._passed = asyncio.Condition()
        self.passes = 0

    async def start(self, tg: asyncio.TaskGroup) -> None:
        self._task = tg.create_task(self._run(), name="retention")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task])

    async def passed(self, count: int = 1) -> None:
        """Until `count` passes have ended."""
        async with self._passed:
            await self._passed.wait_for(lambda: self.passes >= count)

    async def _run(self) -> None:
        await asyncio.sleep(self.settings.first_delay_secs)
        while True:
            await _step("pass", self.run_pass(), None)  # housekeeping never stops the gateway
            await asyncio.sleep(self.settings.interval_secs)

    async def run_pass(self) -> PassCounts:
        now = self._clock()
        counts = PassCounts()
        days = self.settings.retention_days
        if days > 0:
            cutoff = now - timedelta(days=days)
            for table in RetainedTable:
                counts.rows[table] = await _step(
                    f"rows {table}", self._prune_rows(table, cutoff), 0
                )
        counts.channel_state = await _step("channel state", self._prune_row_state(), 0)
        counts.usage = await _step("usage", self._prune_usage(now), 0)
        counts.outbox_files = await _step("outbox files", self._prune_copies(now), Removed())
        if self.settings.media_retention_days > 0:
            before = now - timedelta(days=self.settings.media_retention_days)
            counts.media_files = await _step("media files", self._prune_received(before), Removed())
        log.info("retention_pass", **counts.log_fields())
        async with self._passed:
            self.passes += 1
            self._passed.notify_all()
        return counts

    async def _prune_rows(self, table: RetainedTable, cutoff: datetime) -> int:
        rows = self._store.retention
        return await _drain(lambda after: rows.prune(table, cutoff, after, self.settings.batch), 0)

    async def _prune_usage(self, now: datetime) -> int:
        """Usage rows past `usage_retention_days`; budget totals of periods
        over for more than a month (a monthly total is last charged in its month)."""
        log_before = now - timedelta(days=self.settings.usage_retention_days)
        totals_before = now - timedelta(days=TOTALS_KEPT_DAYS)
        gone = 0
        while True:
            n = await self._store.spend.prune(log_before, totals_before, self.settings.batch)
            gone += n
            if n < self.settings.batch:
                return gone

    async def _prune_row_state(self) -> int:
        rows = self._store.retention
        return await _drain(
            lambda after: rows.prune_row_state(after, self.settings.batch), ("", "")
        )

    async def _prune_copies(self, now: datetime) -> Removed:
        copies = await asyncio.to_thread(outbox_copies, self._outbox_dir)
        orphan_before = (now - timedelta(seconds=ORPHAN_GRACE_SECS)).timestamp()
        # folders a row still to be sent names, whichever row the copy was made for
        named = {PurePath(p).parent for p in await self._store.retention.undelivered_outbox_media()}
        doomed: list[Path] = []
        for chunk in _chunks(copies, self.settings.batch):
            states = await self._store.retention.outbox_states([c.key for c in chunk])
            doomed += [
                c.path
                for c in chunk
                if PurePath(c.path) not in named
                and (
                    states.get(c.key) == "sent"
                    or (c.key not in states and c.modified < orphan_before)
                )
            ]
        return await self._remove(doomed)

    async def _prune_received(self, before: datetime) -> Removed:
        needed = await self._store.retention.unfinished_media()
        old = await asyncio.to_thread(
            received_files, self._received, self._outbox_dir, before.timestamp(), needed
        )
        return await self._remove(old)

    async def _remove(self, paths: Sequence[Path]) -> Removed:
        total = Removed()
        # chunks: when the pass is cancelled, one at most still runs on in its thread
        for chunk in _chunks(paths, self.settings.batch):
            total += await asyncio.to_thread(remove_paths, chunk)
        return total


async def _drain(batch: Callable[[T], Awaitable[Pruned[T]]], start: T) -> int:
    """Run `batch` from `start`, each time from where the last one stopped,
    until one says nothing is left; how many rows went."""
    deleted, after = 0, start
    while True:
        done = await batch(after)
        deleted += done.deleted
        if done.resume_after is None:
            return deleted
        after = done.resume_after


async def _step(name: str, work: Awaitable[T], nothing: T) -> T:
    """One step of a pass: a failure is logged and the pass goes on."""
    try:
        return await work
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("retention_step_failed", step=name)
        return nothing


def _chunks(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
