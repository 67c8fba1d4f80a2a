"""OutboundDispatcher: delivers outbox rows, one sender task per channel.

A sender reads due rows from the outbox (oldest first, per-chat order kept by
the query), sends them, and records the result. A failing channel only delays
itself. Retry policy lives in `classify_failure`, which branches on the
channel error type. Typing/streaming events bypass the outbox (`notify`).
"""

from __future__ import annotations

import asyncio
import functools
import random
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol

import structlog

from channels.base import (
    Channel,
    PermanentSendError,
    RateLimited,
    RecipientOffline,
    TransientSendError,
)
from gateway.bus import ChannelEvent, OutboundMessage
from storage import outbox
from storage.clock import iso, now_iso, parse_iso
from storage.db import Database

__all__ = ["Decision", "OutboundDispatcher", "RetryPolicy", "classify_failure"]

log = structlog.get_logger(__name__)

_NOTIFY_TIMEOUT = 5.0


class DeliveryMetrics(Protocol):
    def outbound_sent(self, channel: str) -> None: ...

    def outbound_failed(self, channel: str) -> None: ...

    def outbound_retry(self, channel: str) -> None: ...


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int = 8
    base_secs: float = 1.0
    max_secs: float = 300.0


@dataclass(frozen=True, slots=True)
class Decision:
    action: str  # "retry" | "park" | "fail"
    delay: float = 0.0
    reason: str = ""


def classify_failure(exc: BaseException, attempts_so_far: int, policy: RetryPolicy) -> Decision:
    """What to do with a row whose send raised `exc` after `attempts_so_far` earlier tries."""
    reason = f"{type(exc).__name__}: {exc}"[:500]
    if isinstance(exc, RecipientOffline):
        return Decision("park", reason=reason)
    if isinstance(exc, PermanentSendError):
        return Decision("fail", reason=reason)
    attempts = attempts_so_far + 1
    if attempts >= policy.max_attempts:
        return Decision("fail", reason=f"gave up after {attempts} attempts; last: {reason}")
    if isinstance(exc, RateLimited):
        return Decision("retry", max(0.0, exc.retry_after), reason)
    backoff = min(policy.max_secs, policy.base_secs * 2 ** (attempts - 1))
    jittered = backoff * random.uniform(0.5, 1.0)
    if not isinstance(exc, TransientSendError | TimeoutError):
        log.error("send_unexpected_error", error=reason)
    return Decision("retry", jittered, reason)


@dataclass(slots=True)
class _SenderState:
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    drained: asyncio.Event = field(default_factory=asyncio.Event)
    unpark: set[str] = field(default_factory=set)


class OutboundDispatcher:
    def __init__(
        self,
        db: Database,
        channels: Mapping[str, Channel],
        policy: RetryPolicy,
        *,
        send_timeout_secs: float = 30.0,
        metrics: DeliveryMetrics | None = None,
    ) -> None:
        self.db = db
        self.channels = channels
        self.policy = policy
        self.send_timeout_secs = send_timeout_secs
        self.metrics = metrics
        self._states = {name: _SenderState() for name in channels}
        for state in self._states.values():
            state.wake.set()  # first pass picks up rows left from a previous run

    def start(self, tg: asyncio.TaskGroup) -> list[asyncio.Task[None]]:
        return [tg.create_task(self._sender(name), name=f"sender:{name}") for name in self.channels]

    def wake(self, channel: str) -> None:
        state = self._states.get(channel)
        if state is None:
            log.error("outbound_unknown_channel", target=channel)
            return
        state.drained.clear()
        state.wake.set()

    def recipient_online(self, channel: str, chat_id: str) -> None:
        state = self._states.get(channel)
        if state is not None:
            state.unpark.add(chat_id)
            self.wake(channel)

    async def notify(self, event: ChannelEvent) -> None:
        channel = self.channels.get(event.channel)
        if channel is None:
            return
        try:
            async with asyncio.timeout(_NOTIFY_TIMEOUT):
                await channel.notify(event)
        except Exception as exc:  # best effort by contract
            log.warning("notify_failed", kind=event.kind.value, error=type(exc).__name__)

    async def enqueue(self, message: OutboundMessage, inbox_id: int | None = None) -> int:
        """Durably queue a message that is not the reply to a turn (commands, jobs)."""
        if message.channel not in self.channels:
            raise ValueError(f"no enabled channel named {message.channel!r}")
        row_id = await self.db.write(lambda c: outbox.enqueue(c, message, inbox_id))
        self.wake(message.channel)
        return row_id

    async def flush(self, grace_secs: float) -> bool:
        """Wait until every sender has no due rows left; False on timeout."""
        for name in self._states:
            self.wake(name)
        try:
            async with asyncio.timeout(grace_secs):
                for state in self._states.values():
                    await state.drained.wait()
        except TimeoutError:
            return False
        return True

    async def _sender(self, name: str) -> None:
        """Runs until cancelled; a storage hiccup is logged and retried, never fatal."""
        failures = 0
        while True:
            try:
                await self._pass(name)
                failures = 0
            except asyncio.CancelledError:
                raise
            except Exception:
                failures += 1
                log.exception("sender_pass_failed", target=name, failures=failures)
                await asyncio.sleep(min(30.0, 0.5 * 2 ** min(failures, 6)))

    async def _pass(self, name: str) -> None:
        channel = self.channels[name]
        state = self._states[name]
        state.wake.clear()
        if state.unpark:
            chats, state.unpark = sorted(state.unpark), set()
            await self.db.write(functools.partial(_unpark_all, channel=name, chats=chats))
        rows = await self.db.read(lambda c: outbox.due_rows(c, name, now_iso()))
        if not rows:
            state.drained.set()
            await self._sleep_until_due(name, state)
            return
        await self._deliver(channel, rows)

    async def _sleep_until_due(self, name: str, state: _SenderState) -> None:
        next_at = await self.db.read(lambda c: outbox.next_due_at(c, name))
        delay: float | None = None
        if next_at is not None:
            delay = max(0.0, (parse_iso(next_at) - datetime.now(UTC)).total_seconds())
        try:
            async with asyncio.timeout(delay):
                await state.wake.wait()
        except TimeoutError:
            pass

    async def _deliver(self, channel: Channel, rows: list[outbox.OutboxRow]) -> None:
        """Send in order; each success is queued for the next group commit at
        once, so a crash can re-send at most what went out in the last commit."""
        marks: list[asyncio.Future[None]] = []
        blocked: set[str] = set()
        for row in rows:
            if row.chat_id in blocked:
                continue
            try:
                async with asyncio.timeout(self.send_timeout_secs):
                    await channel.send(row.to_message())
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                blocked.add(row.chat_id)
                await self._record_failure(channel.name, row, exc)
                continue
            mark = functools.partial(outbox.mark_sent, ids=[row.id])
            queued = self.db.submit(mark)
            if queued is None:
                await asyncio.shield(self.db.write(mark))
            else:
                marks.append(queued)
            if self.metrics is not None:
                self.metrics.outbound_sent(channel.name)
        if marks:  # already queued: they commit even if this task is cancelled
            await asyncio.gather(*marks)

    async def _record_failure(self, name: str, row: outbox.OutboxRow, exc: Exception) -> None:
        decision = classify_failure(exc, row.attempts, self.policy)
        if decision.action == "park":
            log.info("outbound_parked", outbox_id=row.id, chat_id=row.chat_id)
            await self.db.write(lambda c: outbox.park(c, row.id, decision.reason))
        elif decision.action == "fail":
            log.error("outbound_failed", outbox_id=row.id, target=name, reason=decision.reason)
            await self.db.write(lambda c: outbox.mark_failed(c, row.id, decision.reason))
            if self.metrics is not None:
                self.metrics.outbound_failed(name)
        else:
            at = iso(datetime.now(UTC) + timedelta(seconds=decision.delay))
            log.warning(
                "outbound_retry",
                outbox_id=row.id,
                target=name,
                delay=round(decision.delay, 2),
                reason=decision.reason,
            )
            await self.db.write(lambda c: outbox.reschedule(c, row.id, at, decision.reason))
            if self.metrics is not None:
                self.metrics.outbound_retry(name)


def _unpark_all(conn: sqlite3.Connection, *, channel: str, chats: list[str]) -> None:
    for chat_id in chats:
        outbox.unpark(conn, channel, chat_id)
