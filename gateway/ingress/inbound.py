"""InboundProcessor: bus → durable inbox → the session's queue (or a command lane).

Messages are taken from the bus in batches and recorded in one commit; only
then is each channel's receipt resolved (ack after durable). A duplicate
(channel, message id) resolves as DUPLICATE and produces nothing. Then the
access policy judges the batch (gateway.access.gate: one read at most): a
refused message is closed there and goes no further. Routing
never waits on storage for a plain message: it is handed to its session's
queue at once; commands, and messages queued behind a chat's commands, go to
that chat's command lane (gateway.commands), which runs off this loop.

Each message's locale (gateway.i18n.locales) is resolved here, once, onto its
`WorkItem`: every text written in answer to it (a command's reply, a refusal,
a failed turn's notice) reads it from there.

A dead letter that is a message the gateway wrote can be retried
(`retry_dead_letter`, the console's and, with the gateway stopped, `picobot
dead-letters retry`'s storage function): recorded in the inbox at last and
routed as recovery routes a row never started.

With several workers on one database (`handover`, docs/scale-out.md) a message
whose chat another live worker holds is forwarded to it instead of routed
here, and recovery at start takes over only the chats dead workers left.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import structlog

from gateway.access.gate import AccessGate
from gateway.access.later import Held
from gateway.access.policy import Verdict
from gateway.bus import InboundMessage, MessageBus, Origin, OutboundMessage, Receipt, reply_handle
from gateway.commands import CommandLanes, CommandRegistry
from gateway.i18n import Locale, Msg, tr
from gateway.i18n.locales import DEFAULT_LOCALES, LocaleResolver
from gateway.ingress.dead_letters import DeadLetterSink
from gateway.ingress.handover import Handover
from gateway.lifecycle import ShutdownBudget, cancel_and_wait
from gateway.ops import tracing
from gateway.sessions.manager import SessionManager
from gateway.work import MessageTrace, WorkItem
from storage.errors import StorageUnavailable
from storage.sql.delivery import inbox
from storage.sql.delivery.inbox import InboxEntry, InboxState, NotAMessage
from storage.store import Store

__all__ = ["InboundProcessor", "NotRetried", "Retried"]

log = structlog.get_logger(__name__)

_BATCH_MAX = 256


@dataclass(frozen=True, slots=True)
class Retried:
    inbox_id: int | None  # None: the inbox had the message already (nothing new to answer)
    channel: str
    chat_id: str


class NotRetried(Exception):
    """A dead letter not recorded again (a platform's raw event, or the inbox
    refused it once more): why, for the operator. The dead letter stays."""


class InboundProcessor:
    def __init__(
        self,
        bus: MessageBus,
        store: Store,
        sessions: SessionManager,
        registry: CommandRegistry,
        wake: Callable[[str], None],
        *,
        on_accepted: Callable[[str], None] | None = None,
        budget: ShutdownBudget | None = None,
        access: AccessGate | None = None,
        dead_letters: DeadLetterSink | None = None,
        locales: LocaleResolver = DEFAULT_LOCALES,
    ) -> None:
        """`access`: the access policy; None admits everyone (and nobody is admin).
        `dead_letters`: where a message the inbox refuses alone goes (None: the
        channel is told it was not recorded and retries it)."""
        self.bus = bus
        self.store = store
        self.sessions = sessions
        self.registry = registry
        self.wake = wake
        self.access = access
        self.dead_letters = dead_letters
        self.locales = locales
        is_admin = access.policy.is_admin_message if access is not None else None
        self.lanes = CommandLanes(registry, store, wake, self.dispatch, is_admin=is_admin)
        self.on_accepted = on_accepted  # metrics, by channel
        self.budget = budget or ShutdownBudget(30.0)
        self._task: asyncio.Task[None] | None = None
        self.accepted = 0
        self.duplicates = 0
        self.handover: Handover | None = None  # several workers: set by the root

    name = "inbound"

    async def start(self, tg: asyncio.TaskGroup) -> None:
        """Recovery first, then the loop (so recovered turns keep their order)."""
        await self.recover()
        self._task = tg.create_task(self.run(), name="inbound-processor")

    async def stop(self) -> None:
        """Ingress off: the bus refuses new messages; what it holds is recorded
        and routed within the shutdown budget."""
        self.bus.close()
        if self._task is None:
            return
        try:
            async with asyncio.timeout(self.budget.left()):
                await asyncio.shield(self._task)
        except TimeoutError:
            log.warning("shutdown_inbound_not_drained", queued=self.bus.depth)
            await cancel_and_wait([self._task])

    async def recover(self) -> int:
        """Re-route inbox rows a previous run left unfinished; returns how many."""
        if unreadable := await self.store.set_aside_unreadable_inbox():
            log.error("inbox_rows_unreadable", rows=unreadable, kept_in="picobot dead-letters list")
        if self.handover is not None:  # only what dead workers left: the live ones run theirs
            resumed = await self.handover.sweep()
        else:
            entries = await self.store.unfinished_inbox()
            await self.resume_entries(entries, admit=True)
            resumed = len(entries)
        if resumed:
            log.info("inbox_recovered", rows=resumed)
        return resumed

    async def resume_entries(self, entries: Sequence[InboxEntry], admit: bool) -> None:
        """Route unfinished inbox rows as a restart does: `started` ones resume;
        with `admit`, the never-started are judged first (a crash right after
        their commit may have come before their judgement)."""
        items = [self.item_of(e) for e in entries]
        judged = [i for i in items if not i.resume] if admit else []
        admitted = {i.inbox_id for i in await self.admit(judged)}
        for item in items:
            if item.resume or not admit or item.inbox_id in admitted:
                await self.route(item)
            elif item.trace is not None:  # refused: its trace ends here
                item.trace.done()

    async def reload(self, batch: Sequence[WorkItem]) -> list[WorkItem]:
        """`batch` as recovery would route it now, for a turn storage failed
        (gateway.sessions.manager): only its rows still unfinished (one already
        answered is not run twice), `started` ones resumed. Admission and the
        approval it carries on from stay as they were judged."""
        wanted = {item.inbox_id: item for item in batch}
        return [
            self._resumed(
                e,
                approval_id=wanted[e.id].approval_id,
                locale=wanted[e.id].locale,
                trace=wanted[e.id].trace,
            )
            for e in await self.store.unfinished_inbox()
            if e.id in wanted
        ]

    def item_of(self, entry: InboxEntry) -> WorkItem:
        """A row read back from the inbox (a restart, another worker's), as
        recovery routes it."""
        # a recovered message starts a new trace: the old one ended with its process
        trace = tracing.begin_message(entry.message, entry.id, recovered=True)
        return self._resumed(entry, trace=trace)

    def _resumed(
        self,
        entry: InboxEntry,
        *,
        approval_id: int | None = None,
        locale: Locale | None = None,
        trace: MessageTrace | None = None,
    ) -> WorkItem:
        return WorkItem(
            entry.id,
            entry.message,
            resume=entry.state is InboxState.STARTED,
            session_id=entry.session_id,
            approval_id=approval_id,
            locale=locale or self.locales.resolve(entry.message),
            trace=trace,
        )

    async def retry_dead_letter(self, letter_id: int) -> Retried | None:
        """Record dead letter `letter_id`'s message in the inbox (the dead
        letter goes in the same commit) and route it now, judged by the access
        gate like any message; None when there is no such dead letter.
        Raises `NotRetried`; StorageUnavailable when writes fail for now."""
        try:
            requeued = await self.store.delivery.requeue_dead_letter(letter_id)
        except NotAMessage as exc:
            raise NotRetried(str(exc)) from None
        except StorageUnavailable:  # writes fail for now: try again later
            raise
        except Exception as exc:  # the inbox refused it alone, as it did the first time
            log.warning("dead_letter_not_recorded", dead_letter=letter_id, error=repr(exc))
            raise NotRetried(
                f"the inbox refused it again ({type(exc).__name__}): it stays a dead letter"
            ) from exc
        if requeued is None:
            return None
        message = requeued.message
        log.info("dead_letter_retried", dead_letter=letter_id, inbox_id=requeued.inbox_id)
        if requeued.inbox_id is not None:
            self.accepted += 1
            if self.on_accepted is not None:
                self.on_accepted(message.channel)
            item = WorkItem(requeued.inbox_id, message, locale=self.locales.resolve(message))
            if self.handover is not None:  # judged where its chat is held
                await self.handover.place([item], judged=False)
            else:
                for admitted in await self.admit([item]):
                    await self.route(admitted)
        return Retried(requeued.inbox_id, message.channel, message.chat_id)

    async def run(self) -> None:
        """Until the bus is closed and drained."""
        bus = self.bus
        while (first := await bus.get()) is not None:
            batch = [first]
            while len(batch) < _BATCH_MAX and (more := bus.get_nowait()) is not None:
                batch.append(more)
            await self._process(batch)

    async def _process(self, batch: list[InboundMessage]) -> None:
        poison = True  # a job that failed alone failed on its message, not on storage
        recording = time.time_ns()  # where each message's trace starts
        try:  # one job each: a bad message fails alone, the batch shares a commit
            outcomes = await self.store.record_inbound(batch)
        except Exception as exc:
            log.exception("inbox_write_failed", batch=len(batch))
            outcomes, poison = [exc] * len(batch), False
        accepted: list[WorkItem] = []
        over_cap: set[int] = set()  # inbox ids refused in their ack: the queue is full
        planned: dict[tuple[str, str], int] = {}
        redelivered: list[InboundMessage] = []
        for message, outcome in zip(batch, outcomes, strict=True):
            receipt = message.receipt
            if isinstance(outcome, Exception):
                # a database that refuses writes for now refuses every job alike
                poisoned = poison and not isinstance(outcome, StorageUnavailable)
                settled = poisoned and await self._dead_letter(message, outcome)
                if receipt is not None and not receipt.done():
                    if settled:
                        receipt.set_result(Receipt.DEAD_LETTER)
                    else:
                        receipt.set_exception(outcome)  # the channel must not ack
                continue
            if outcome is None:
                self.duplicates += 1
                redelivered.append(message)
                log.info(
                    "inbound_duplicate", channel=message.channel, message_id=message.message_id
                )
                if receipt is not None and not receipt.done():
                    receipt.set_result(Receipt.DUPLICATE)
                continue
            self.accepted += 1
            if self.on_accepted is not None:
                self.on_accepted(message.channel)
            full = self._over_cap(message, planned)
            if full:
                over_cap.add(outcome)
            if receipt is not None and not receipt.done():
                receipt.set_result(Receipt.REFUSED if full else Receipt.ACCEPTED)
            trace = tracing.begin_message(message, outcome, start_ns=recording)
            locale = self.locales.resolve(message)
            accepted.append(WorkItem(outcome, message, locale=locale, trace=trace))
        if self.handover is not None:
            try:
                await self._place(accepted, over_cap, redelivered)
            except asyncio.CancelledError:
                raise
            except Exception:  # the rows stay unfinished: the next heartbeat's look routes them
                log.exception("handover_failed", batch=len(accepted))
            return
        admitted = await self.admit(accepted)
        for item in accepted:  # a refused message's trace ends here
            if item.trace is not None and item not in admitted:
                item.trace.done()
        for item in admitted:
            if item.inbox_id in over_cap:
                await self._refuse_overflow(item)
            else:
                await self.route(item)

    async def _place(
        self, accepted: list[WorkItem], over_cap: set[int], redelivered: list[InboundMessage]
    ) -> None:
        """With several workers: each message to the worker that holds its chat,
        judged there (docs/scale-out.md); a redelivered one still unfinished
        has its chat looked at again (its recorder may have died)."""
        assert self.handover is not None
        refused = [i for i in accepted if i.inbox_id in over_cap]
        for item in refused:  # answered here and now: never queued too
            self.handover.chats.first_routing(item.inbox_id)
        await self.handover.place([i for i in accepted if i.inbox_id not in over_cap], judged=False)
        if redelivered:
            await self.handover.redelivered(redelivered)
        for item in refused:
            await self._refuse_overflow(item)

    def _over_cap(self, message: InboundMessage, planned: dict[tuple[str, str], int]) -> bool:
        """Whether a plain message will find its chat's queue full (counting the
        batch's earlier ones), so that its ack can say so: the same test as
        `SessionManager.dispatch`. Commands, and chats with commands queued,
        take the lane path, which answers for itself."""
        key = (message.channel, message.chat_id)
        if self.registry.parse(message.text) is not None or self.lanes.busy(key):
            return False
        used = planned.get(key, 0)
        if used >= self.sessions.room(*key):
            return True
        planned[key] = used + 1
        return False

    async def _dead_letter(self, message: InboundMessage, exc: Exception) -> bool:
        """Keep a message the inbox refused as a dead letter; False if that failed too."""
        if self.dead_letters is None:
            return False
        try:
            await self.dead_letters.record(
                message.channel,
                message.message_id,
                inbox.inbound_to_json(message, ensure_ascii=True),
                f"not recorded: {type(exc).__name__}",
            )
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("dead_letter_failed", channel=message.channel)
            return False
        return True

    async def admit(self, items: list[WorkItem]) -> list[WorkItem]:
        """The items the access policy lets through, in order; the refused are
        closed (gateway.access.gate). A refused sender's command open to all
        (/whoami) goes through when the gate says it may be answered."""
        gate = self.access
        if gate is None or not items:
            return items
        try:
            verdicts = await gate.judge(items)
        except asyncio.CancelledError:
            raise
        except Exception:
            # the rows stay unfinished in the inbox and are judged again at next start
            log.exception("access_check_failed", batch=len(items))
            return []
        admitted: list[WorkItem] = []
        for item, verdict in zip(items, verdicts, strict=True):
            if verdict.admitted and await self._over_limit(gate, item, verdict):
                continue  # answered with a reply saying so
            if verdict.admitted or await self._open_command(gate, item, verdict):
                admitted.append(item)
                continue
            try:
                await gate.refuse(item, verdict)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("access_refusal_failed", channel=item.message.channel)
        return admitted

    async def _over_limit(self, gate: AccessGate, item: WorkItem, verdict: Verdict) -> bool:
        """A person's message (not a command, not a scheduled run, not a resumed
        row) over its sender's rate or a budget."""
        message = item.message
        if item.resume or message.request.origin is not Origin.CHAT:
            return False
        if self.registry.parse(message.text) is not None:
            return False
        try:
            return await gate.over_limit(item, verdict)
        except asyncio.CancelledError:
            raise
        except Exception:  # the message is answered as if there were no limit
            log.exception("rate_limit_failed", channel=item.message.channel)
            return False

    async def release(self, held: Held) -> None:
        """A message kept over its sender's rate, fallen due (gateway.access.later):
        through the gate again (it may wait once more), then to its session."""
        gate = self.access
        assert gate is not None
        if not await gate.over_limit(held.item, held.verdict, again=True):
            await self.route(held.item)

    async def _open_command(self, gate: AccessGate, item: WorkItem, verdict: Verdict) -> bool:
        command = self.registry.parse(item.message.text)
        if command is None or not command[0].open_to_all:
            return False
        try:
            return await gate.may_answer(item.message, verdict)
        except asyncio.CancelledError:
            raise
        except Exception:  # refused instead, like any other message of theirs
            log.exception("access_reply_limit_failed", channel=item.message.channel)
            return False

    async def route(self, item: WorkItem) -> None:
        """An admitted item to its session or command lane: here, or with
        several workers where its chat is held."""
        if self.handover is not None:
            await self.handover.place([item], judged=True)
        else:
            await self.route_here(item)

    async def route_here(self, item: WorkItem) -> None:
        """Waits for nothing but in the rare case of a chat flooding commands:
        what needs storage runs in the conversation's command lane."""
        command = None if item.resume else self.registry.parse(item.message.text)
        try:
            if (
                command is None
                and not self.lanes.busy(item.conversation)
                and self.sessions.dispatch(item, force=item.resume)
            ):
                return
            if not self.lanes.queue(item, command):
                await self._refuse(item, Msg.COMMANDS_QUEUED, self.lanes.max_queued)
        except asyncio.CancelledError:
            raise
        except Exception:
            # the row stays unfinished in the inbox and is retried at next start
            log.exception("inbound_route_failed", channel=item.message.channel)

    async def dispatch(self, item: WorkItem) -> None:
        """Hand a plain message to its session; refuse it if that queue is full."""
        if not self.sessions.dispatch(item, force=item.resume):
            await self._refuse_overflow(item)

    async def _refuse_overflow(self, item: WorkItem) -> None:
        await self._refuse(item, Msg.MESSAGES_QUEUED, self.sessions.max_pending)

    async def _refuse(self, item: WorkItem, why: Msg, count: int) -> None:
        """Close the row with the refusal `why` (its text says `count` are queued)."""
        m = item.message
        log.warning("inbound_refused", channel=m.channel, chat_id=m.chat_id, reason=why.value)
        text = tr(item.locale, why, count=count)
        out = OutboundMessage(m.channel, m.chat_id, text, reply_to_message_id=reply_handle(m))
        if item.trace is not None:
            out = item.trace.stamp(out)
            item.trace.done()
        await self.store.answer([item.inbox_id], out)
        self.wake(m.channel)
