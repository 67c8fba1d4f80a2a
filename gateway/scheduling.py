"""The scheduler's view of the gateway (`SchedulerHost`): durable sends and
agent turns that the caller can await to their end."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from gateway.bus import InboundMessage, MessageBus, NoSuchChannel, OutboundMessage, Receipt
from gateway.delivery.outbound import OutboundDispatcher
from gateway.i18n import Locale, Msg, tr
from gateway.work import STOPPED_OUTCOME, TurnOutcome, WorkItem

__all__ = ["PipelineHost", "TurnWaiters"]


class TurnWaiters:
    """Futures for turns someone awaits, keyed by (channel, platform message id)."""

    def __init__(self) -> None:
        self._waiting: dict[tuple[str, str], asyncio.Future[TurnOutcome]] = {}

    def expect(self, message: InboundMessage) -> asyncio.Future[TurnOutcome]:
        future: asyncio.Future[TurnOutcome] = asyncio.get_running_loop().create_future()
        self._waiting[(message.channel, message.message_id)] = future
        return future

    def forget(self, message: InboundMessage) -> None:
        self._waiting.pop((message.channel, message.message_id), None)

    def handed_over(self, items: Sequence[WorkItem]) -> None:
        """`items` went to the worker that holds their chat (docs/scale-out.md),
        which runs their turn: for whoever awaits it here, the run is done."""
        self.turn_done(items, TurnOutcome(ok=True))

    def turn_done(self, batch: Sequence[WorkItem], outcome: TurnOutcome | None) -> None:
        result = outcome or STOPPED_OUTCOME
        for item in batch:
            future = self._waiting.pop((item.message.channel, item.message.message_id), None)
            if future is not None and not future.done():
                future.set_result(result)


class PipelineHost:
    def __init__(
        self,
        bus: MessageBus,
        dispatcher: OutboundDispatcher,
        waiters: TurnWaiters,
        locale_of: Callable[[str], Locale] = lambda channel: Locale.EN,
    ) -> None:
        """`locale_of(channel)`: the language of a failure notice (gateway.i18n.locales)."""
        self.bus = bus
        self.locale_of = locale_of
        self.dispatcher = dispatcher
        self.waiters = waiters

    def _check_target(self, channel: str) -> None:
        if channel not in self.dispatcher.channels:
            raise NoSuchChannel(
                f"channel {channel!r} is not enabled: enable it, or pause or delete the job"
            )

    async def send_message(self, channel: str, chat_id: str, text: str) -> None:
        self._check_target(channel)
        await self.dispatcher.enqueue(OutboundMessage(channel, chat_id, text))

    async def notify_failure(self, channel: str, chat_id: str, job_id: str) -> None:
        text = tr(self.locale_of(channel), Msg.SCHEDULED_TIMED_OUT, job=job_id)
        await self.send_message(channel, chat_id, text)

    async def run_agent_task(self, message: InboundMessage) -> None:
        self._check_target(message.channel)
        future = self.waiters.expect(message)
        try:
            receipt = await self.bus.submit(message)
            if receipt is Receipt.DUPLICATE:
                return  # this run was recorded before (a restart); it is not run twice
            outcome = await future
        finally:
            self.waiters.forget(message)
        if not outcome.ok:
            raise RuntimeError(outcome.error or "the agent task failed")
