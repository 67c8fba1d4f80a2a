"""OutboundDispatcher: delivers outbox rows, one sender task per channel.

A sender gets rows handed over in memory right after they commit, or reads
due rows from the outbox (oldest first, per-chat order kept by the query);
it sends them and records the result. A failing channel only delays
itself. What a failed send means is decided by `classify_failure`
(gateway.delivery.policy): a row ends by time, never by attempt count. A
channel whose platform stops answering is degraded (gateway.delivery.health):
its sender holds every row and sends one probe row at a time until the
platform answers, then all its rows go again, oldest first. Typing/streaming
events bypass the outbox (`notify`).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol

import structlog

from channels.base import Channel, RecipientOffline
from gateway.bus import ChannelEvent, NoSuchChannel, OutboundMessage
from gateway.delivery.health import ChannelHealth
from gateway.delivery.policy import (
    Action,
    RetryPolicy,
    classify_failure,
    gave_up,
    with_late_note,
)
from gateway.i18n import Locale
from gateway.lifecycle import ShutdownBudget, cancel_and_wait
from gateway.ops import tracing
from storage.clock import iso, parse_iso
from storage.sql.delivery import outbox
from storage.store import Store

__all__ = ["DeliveryMetrics", "OutboundDispatcher", "SendingHealth"]

log = structlog.get_logger(__name__)

_NOTIFY_TIMEOUT = 5.0
_READY_MAX = 1024  # rows handed over in memory; beyond that the sender scans
_COPIES_MAX = 1024


class DeliveryMetrics(Protocol):
    def outbound_sent(self, channel: str) -> None: ...

    def outbound_failed(self, channel: str, count: int = 1) -> None: ...

    def outbound_retry(self, channel: str) -> None: ...


@dataclass(frozen=True, slots=True)
class SendingHealth:
    """One channel's sending as its sender sees it now (in memory: since start)."""

    problem: str | None  # why it takes no sends (degraded), as /ready says; None: fine
    last_error: str | None  # the last send that failed, for whatever reason
    last_error_at: datetime | None
    last_sent_at: datetime | None  # the last send that went


@dataclass(slots=True)
class _SenderState:
    """One channel's sender. Rows reach it two ways:

    - handed over in memory right after their commit (`handoff`), the fast
      path: no read back from the database;
    - by scanning the outbox, needed at start, after a wake-up (a command
      reply, an unpark, a retry coming due) and after any failed send.

    A row is sent by exactly one of the two. While `scanning`, handed-over
    rows are not kept (the scan finds them) and `dirty` makes the scan run
    again in case a row committed after it read; the sender leaves scan mode
    only after a scan that found nothing due with nothing handed over
    meanwhile, and it never scans while handed-over rows wait in `ready`
    or marks of sent rows are uncommitted. Reads and commits run in order on
    the database's one thread, so a row committed after a scan read is
    handed over after that scan's result arrives.

    While the channel is degraded the sender stays in scan mode and keeps
    nothing in `ready` (every handed-over row is committed: a scan finds it);
    it sends one row per probe, found by a scan, so per-chat order holds.
    """

    wake: asyncio.Event = field(default_factory=asyncio.Event)
    drained: asyncio.Event = field(default_factory=asyncio.Event)
    unpark: set[str] = field(default_factory=set)
    ready: deque[outbox.OutboxRow] = field(default_factory=deque)
    scanning: bool = True  # the first pass picks up rows left from a previous run
    dirty: bool = False
    waiting_chats: frozenset[str] = frozenset()  # their new rows must queue behind
    next_due_at: str | None = None
    marks: list[asyncio.Future[None]] = field(default_factory=list)
    health: ChannelHealth = field(default_factory=ChannelHealth)
    fresh: bool = True  # rows a previous run left waiting are tried at the first scan
    # rows other workers sent, for this worker's recipients too (docs/scale-out.md)
    copies: deque[int] = field(default_factory=lambda: deque(maxlen=_COPIES_MAX))

    def rescan(self) -> None:
        self.scanning = self.dirty = True
        self.drained.clear()
        self.wake.set()


class SendGate(Protocol):
    """Which channels this worker sends, with several workers on one database
    (gateway.cluster.channels, docs/scale-out.md)."""

    def sends(self, name: str) -> bool: ...

    async def wait_sending(self, name: str) -> None: ...

    def announce(self, name: str, chat_id: str | None, sent: int | None = None) -> None:
        """Rows of `name` were committed (or parked) here for whoever sends them;
        or row `sent` went to this worker's recipients of `chat_id`."""
        ...


class OutboundDispatcher:
    def __init__(
        self,
        store: Store,
        channels: Mapping[str, Channel],
        policy: RetryPolicy,
        *,
        send_timeout_secs: float = 30.0,
        rescan_secs: float = 30.0,
        metrics: DeliveryMetrics | None = None,
        budget: ShutdownBudget | None = None,
        locale_of: Callable[[str], Locale] = lambda channel: Locale.EN,
        gate: SendGate | None = None,
    ) -> None:
        """`locale_of(channel)`: the language of the late note (gateway.i18n.locales).
        `gate`: with several workers, which channels this one sends (None: all)."""
        self.store = store
        self.channels = channels
        self.policy = policy
        self.send_timeout_secs = send_timeout_secs
        self.rescan_secs = rescan_secs  # rows nobody handed over: `outbox retry` from the CLI
        self.metrics = metrics
        self.budget = budget or ShutdownBudget(30.0)
        self.locale_of = locale_of
        self.gate = gate
        self._tasks: list[asyncio.Task[None]] = []
        self._states = {name: _SenderState() for name in channels}
        for state in self._states.values():
            state.wake.set()

    name = "outbound"

    async def start(self, tg: asyncio.TaskGroup) -> None:
        """One sender task per channel."""
        self._tasks = [
            tg.create_task(self._sender(name), name=f"sender:{name}") for name in self.channels
        ]

    async def stop(self) -> None:
        """Send what is due within the shutdown budget, then end the senders."""
        if not await self.flush(self.budget.left(1.0)):
            log.warning("shutdown_outbox_not_flushed")
        await cancel_and_wait(self._tasks)

    def wake(self, channel: str) -> None:
        """New rows were committed for `channel`: look for them in the outbox."""
        state = self._states.get(channel)
        if state is None:
            log.error("outbound_unknown_channel", target=channel)
            return
        if self.gate is not None and not self.gate.sends(channel):
            self.gate.announce(channel, None)  # the worker that sends it looks
            return
        state.rescan()

    def announced(self, channel: str, chat_id: str | None, sent: int | None = None) -> None:
        """Another worker committed (or parked) rows of `channel`: look for them
        if this worker sends them (for a channel of local recipients: if the
        recipient is connected here). `sent`: a row another worker delivered to
        its recipients of `chat_id`: this worker's get a copy."""
        target = self.channels.get(channel)
        if target is None or self.gate is None:
            return
        if sent is not None:
            state = self._states.get(channel)
            if state is not None and chat_id is not None and target.reaches(chat_id):
                state.copies.append(sent)
                state.wake.set()
            return
        if target.local_recipients:
            if chat_id is not None and target.reaches(chat_id):
                self.recipient_online(channel, chat_id)
        elif self.gate.sends(channel):
            self.wake(channel)

    def handoff(self, message: OutboundMessage, row_id: int) -> None:
        """`message` was just committed as outbox row `row_id`: send it without
        reading it back, unless the sender must scan anyway."""
        state = self._states.get(message.channel)
        if state is None:
            log.error("outbound_unknown_channel", target=message.channel)
            return
        if self.gate is not None and not self.gate.sends(message.channel):
            self.gate.announce(message.channel, message.chat_id)
            return
        if (
            state.scanning
            or state.health.degraded
            or message.chat_id in state.waiting_chats
            or len(state.ready) >= _READY_MAX
        ):
            state.rescan()
            return
        state.ready.append(outbox.OutboxRow.new(message, row_id))
        state.drained.clear()
        state.wake.set()

    def sending_problem(self, channel: str) -> str | None:
        """Why `channel` is not taking sends (for /ready); None when it is."""
        state = self._states.get(channel)
        return None if state is None else state.health.not_ready_reason()

    def health(self, channel: str) -> SendingHealth | None:
        """How `channel`'s sends fare (the console); None for no such channel."""
        state = self._states.get(channel)
        if state is None:
            return None
        h = state.health
        return SendingHealth(
            h.not_ready_reason(), h.last_failure or None, h.last_failure_at, h.last_sent_at
        )

    def recipient_online(self, channel: str, chat_id: str) -> None:
        state = self._states.get(channel)
        if state is not None:
            state.unpark.add(chat_id)
            state.rescan()

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
            raise NoSuchChannel(f"no enabled channel named {message.channel!r}")
        row_id = await self.store.enqueue(message, inbox_id)
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
                self._states[name].rescan()
                await asyncio.sleep(min(30.0, 0.5 * 2 ** min(failures, 6)))

    async def _pass(self, name: str) -> None:
        channel = self.channels[name]
        state = self._states[name]
        state.wake.clear()
        _prune(state)
        if self.gate is not None and not self.gate.sends(name):
            await _stand_by(self.gate, name, state)
            return
        if state.copies:
            await self._copy(channel, state)
        if state.health.degraded:
            await self._probe(channel, state)
            return
        if state.ready:
            rows = list(state.ready)
            state.ready.clear()
            await self._deliver(channel, rows, state, blocked=set(state.waiting_chats))
            return
        if state.scanning:
            await self._before_scan(name, state)
            state.dirty = False
            found = await self.store.outbox_scan(name)
            state.waiting_chats, state.next_due_at = found.waiting_chats, found.next_due_at
            if found.due:  # the query keeps per-chat order: nothing blocked yet
                await self._deliver(channel, found.due, state, blocked=set())
                return
            if state.dirty:
                return
            state.scanning = False
        state.drained.set()
        await self._sleep_until_due(state)

    async def _before_scan(self, name: str, state: _SenderState) -> None:
        await _settle(state)  # a scan must not see rows sent but not yet marked
        if state.unpark:
            chats, state.unpark = sorted(state.unpark), set()
            await self.store.unpark(name, chats)
        if state.fresh:  # a start is the moment to try again whatever waited
            await self.store.outbox_resume(name)
            state.fresh = False

    async def _probe(self, channel: Channel, state: _SenderState) -> None:
        """Degraded: when the probe is due, send the first due row alone; keep
        every other row waiting for the next probe, and fail those out of time."""
        name, health = channel.name, state.health
        state.ready.clear()  # committed rows: the scan finds them
        await self._before_scan(name, state)
        now = datetime.now(UTC)
        if health.probe_due(now):
            found = await self.store.outbox_scan(name)
            state.waiting_chats = found.waiting_chats
            if found.due:
                await self._deliver(channel, found.due[:1], state, blocked=set())
                if not health.degraded:
                    return  # the platform answered: every row may go again
                now = datetime.now(UTC)
        until = max(now, health.next_probe_at or now)
        clock_before = now - timedelta(seconds=self.policy.give_up_after_secs)
        held = await self.store.outbox_hold(
            name, iso(until), iso(clock_before), gave_up(self.policy, health.last_error)
        )
        if held.expired:
            log.error("outbound_expired", target=name, rows=held.expired, reason=health.last_error)
            if self.metrics is not None:
                self.metrics.outbound_failed(name, held.expired)
        state.next_due_at = held.next_due_at
        state.drained.set()  # nothing may go before the probe: a flush need not wait
        await self._sleep_until_due(state)

    async def _sleep_until_due(self, state: _SenderState) -> None:
        delay = self.rescan_secs
        if state.next_due_at is not None:
            due_in = (parse_iso(state.next_due_at) - datetime.now(UTC)).total_seconds()
            delay = max(0.0, min(delay, due_in))
        try:
            async with asyncio.timeout(delay):
                await state.wake.wait()
        except TimeoutError:
            state.rescan()  # a retry came due, or it is time to look anyway

    async def _deliver(
        self,
        channel: Channel,
        rows: list[outbox.OutboxRow],
        state: _SenderState,
        *,
        blocked: set[str],
    ) -> None:
        """Send in order, skipping `blocked` chats (an earlier row of theirs
        waits: the scan sends theirs in order), and stopping when the channel
        becomes degraded. Each success is queued for the next group commit at
        once, so a crash can re-send at most what went out in the last commit."""
        for row in rows:
            if row.chat_id in blocked:
                state.rescan()
                continue
            try:
                if self._elsewhere(channel, row.chat_id):
                    raise RecipientOffline("no recipient connected to this worker")
                async with asyncio.timeout(self.send_timeout_secs):
                    message = row.to_message()
                    waited = (datetime.now(UTC) - parse_iso(row.created_at)).total_seconds()
                    fallback = self.locale_of(channel.name)
                    with tracing.sending(message):  # a span of the reply's trace
                        await channel.send(with_late_note(message, waited, self.policy, fallback))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                blocked.add(row.chat_id)
                state.waiting_chats |= {row.chat_id}
                state.rescan()
                await self._record_failure(channel.name, row, exc, state)
                if state.health.degraded:
                    return  # the rest waits for the probe
                continue
            state.health.sent(datetime.now(UTC))
            if self.gate is not None and channel.local_recipients:  # their other devices
                self.gate.announce(channel.name, row.chat_id, sent=row.id)
            queued = self.store.mark_sent_soon(row.id)
            if queued is None:
                await self.store.mark_sent(row.id)
            else:
                state.marks.append(queued)  # commits even if this task is cancelled
            if self.metrics is not None:
                self.metrics.outbound_sent(channel.name)
            tracing.delivered(row.metadata)
            await self._answered(channel.name, state)

    async def _copy(self, channel: Channel, state: _SenderState) -> None:
        """Rows another worker sent, to this worker's recipients of their chats
        (best effort: nothing is marked, the row is that worker's)."""
        ids = list(state.copies)
        state.copies.clear()
        for row in await self.store.cluster.outbox_rows(ids):
            if not channel.reaches(row.chat_id):
                continue
            try:
                async with asyncio.timeout(self.send_timeout_secs):
                    await channel.send(row.to_message())
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.info("outbound_copy_failed", outbox_id=row.id, error=type(exc).__name__)

    def _elsewhere(self, channel: Channel, chat_id: str) -> bool:
        """With several workers: the chat's recipient is not connected here
        (another worker's, or nobody's: parked either way)."""
        return self.gate is not None and channel.local_recipients and not channel.reaches(chat_id)

    async def _record_failure(
        self, name: str, row: outbox.OutboxRow, exc: Exception, state: _SenderState
    ) -> None:
        now = datetime.now(UTC)
        waited = (now - parse_iso(row.clock_start)).total_seconds()
        decision = classify_failure(exc, row.attempts, waited, self.policy)
        state.health.send_failed(decision.reason, now)
        if decision.outage:
            self._not_answered(name, state, decision.reason, now)
        else:
            await self._answered(name, state)
        if decision.action is not Action.RETRY:  # its trace waits for it no longer
            tracing.delivered(row.metadata)
        if decision.action is Action.PARK:
            log.info("outbound_parked", outbox_id=row.id, chat_id=row.chat_id)
            await self.store.park(row.id, decision.reason)
            if self.gate is not None:  # the worker its recipient is connected to takes it
                self.gate.announce(name, row.chat_id)
        elif decision.action is Action.FAIL:
            log.error("outbound_failed", outbox_id=row.id, target=name, reason=decision.reason)
            await self.store.mark_failed(row.id, decision.reason)
            if self.metrics is not None:
                self.metrics.outbound_failed(name)
        else:
            # While degraded every probe fails the same way: the episode's one warning says so.
            record = log.debug if state.health.degraded else log.info
            record(
                "outbound_retry",
                outbox_id=row.id,
                target=name,
                delay=round(decision.delay, 2),
                reason=decision.reason,
            )
            at = iso(now + timedelta(seconds=decision.delay))
            await self.store.reschedule(row.id, at, decision.reason)
            if self.metrics is not None:
                self.metrics.outbound_retry(name)

    def _not_answered(self, name: str, state: _SenderState, reason: str, now: datetime) -> None:
        if not state.health.failed(reason, now, self.policy):
            return
        log.warning("outbound_channel_degraded", target=name, reason=reason)
        state.ready.clear()
        state.rescan()

    async def _answered(self, name: str, state: _SenderState) -> None:
        """The platform answered a send: a degraded episode ends, and every
        row it held may go at once."""
        down_secs = state.health.answered(datetime.now(UTC))
        if down_secs is None:
            return
        resumed = await self.store.outbox_resume(name)
        log.info(
            "outbound_channel_recovered", target=name, down_secs=round(down_secs, 1), rows=resumed
        )
        state.rescan()


async def _stand_by(gate: SendGate, name: str, state: _SenderState) -> None:
    """Another worker sends `name`'s rows: wait until this one does (rows
    handed over meanwhile are committed: the first scan after finds them)."""
    if state.ready:
        state.ready.clear()
        gate.announce(name, None)
    state.drained.set()
    await gate.wait_sending(name)
    state.fresh = True
    state.rescan()


async def _settle(state: _SenderState) -> None:
    """Wait for the marks of sent rows to commit."""
    marks, state.marks = state.marks, []
    for result in await asyncio.gather(*marks, return_exceptions=True):
        if isinstance(result, BaseException):
            log.error("outbound_mark_failed", error=repr(result))  # it will be sent again


def _prune(state: _SenderState) -> None:
    """Forget marks already committed (reporting any that failed)."""
    pending: list[asyncio.Future[None]] = []
    for mark in state.marks:
        if not mark.done():
            pending.append(mark)
        elif not mark.cancelled() and mark.exception() is not None:
            log.error("outbound_mark_failed", error=repr(mark.exception()))
    state.marks = pending
