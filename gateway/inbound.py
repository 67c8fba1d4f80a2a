"""InboundProcessor: bus → durable inbox → commands or the session's queue.

Messages are taken from the bus in batches and recorded in one commit; only
then is each channel's receipt resolved (ack after durable). A duplicate
(channel, message id) resolves as DUPLICATE and produces nothing.
"""

from __future__ import annotations

import asyncio
import functools
import sqlite3
from collections.abc import Callable

import structlog

from gateway.bus import InboundMessage, MessageBus, OutboundMessage, Receipt, reply_handle
from gateway.commands import CommandHandler, parse_command
from gateway.execution import WorkItem
from gateway.sessions import SessionManager
from storage import inbox, outbox
from storage.db import Database
from storage.inbox import InboxState

__all__ = ["InboundProcessor"]

log = structlog.get_logger(__name__)

_BATCH_MAX = 256

Outcome = int | None | Exception


class InboundProcessor:
    def __init__(
        self,
        bus: MessageBus,
        db: Database,
        sessions: SessionManager,
        commands: CommandHandler,
    ) -> None:
        self.bus = bus
        self.db = db
        self.sessions = sessions
        self.commands = commands
        self.accepted = 0
        self.duplicates = 0
        self.on_accepted: Callable[[str], None] | None = None  # metrics, by channel

    async def recover(self) -> int:
        """Re-route inbox rows a previous run left unfinished; returns how many."""
        entries = await self.db.read(inbox.unfinished_entries)
        for entry in entries:
            resume = entry.state is InboxState.STARTED
            item = WorkItem(entry.id, entry.message, resume=resume, session_id=entry.session_id)
            await self._route(item)
        if entries:
            log.info("inbox_recovered", rows=len(entries))
        return len(entries)

    async def run(self) -> None:
        queue = self.bus.inbound
        while True:
            batch = [await queue.get()]
            while len(batch) < _BATCH_MAX and not queue.empty():
                batch.append(queue.get_nowait())
            try:
                await self._process(batch)
            finally:
                for _ in batch:
                    queue.task_done()

    async def _process(self, batch: list[InboundMessage]) -> None:
        try:  # one job each: a bad message fails alone, the batch shares a commit
            outcomes: list[Outcome] = await self.db.write_each(
                [functools.partial(inbox.record_inbound, message=m) for m in batch]
            )
        except Exception as exc:
            log.exception("inbox_write_failed", batch=len(batch))
            outcomes = [exc] * len(batch)
        for message, outcome in zip(batch, outcomes, strict=True):
            receipt = message.receipt
            if isinstance(outcome, Exception):
                if receipt is not None and not receipt.done():
                    receipt.set_exception(outcome)  # the channel must not ack
                continue
            if outcome is None:
                self.duplicates += 1
                log.info(
                    "inbound_duplicate", channel=message.channel, message_id=message.message_id
                )
                if receipt is not None and not receipt.done():
                    receipt.set_result(Receipt.DUPLICATE)
                continue
            self.accepted += 1
            if self.on_accepted is not None:
                self.on_accepted(message.channel)
            if receipt is not None and not receipt.done():
                receipt.set_result(Receipt.ACCEPTED)
            await self._route(WorkItem(outcome, message))

    async def _route(self, item: WorkItem) -> None:
        command = None if item.resume else parse_command(item.message.text)
        try:
            if command is not None:
                await self.commands.handle(item, *command)
            elif not self.sessions.dispatch(item, force=item.resume):
                await self._refuse_overflow(item)
        except asyncio.CancelledError:
            raise
        except Exception:
            # the row stays unfinished in the inbox and is retried at next start
            log.exception("inbound_route_failed", channel=item.message.channel)

    async def _refuse_overflow(self, item: WorkItem) -> None:
        m = item.message
        log.warning("session_queue_full", channel=m.channel, chat_id=m.chat_id)
        text = (
            f"I'm still working on {self.sessions.max_pending} earlier messages in this chat. "
            "This one was not queued: please wait for my reply and send it again."
        )

        def refuse(c: sqlite3.Connection) -> None:
            outbox.enqueue(
                c,
                OutboundMessage(m.channel, m.chat_id, text, reply_to_message_id=reply_handle(m)),
                item.inbox_id,
            )
            inbox.mark_done(c, [item.inbox_id])

        await self.db.write(refuse)
        self.commands.wake(m.channel)
