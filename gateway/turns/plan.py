"""A turn before it opens (gateway.turns.execution): what was asked, by whom, under
which run id, and where its answer goes under the request's delivery policy."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from gateway.bus import ChannelEvent, Delivery, EventKind, TurnRequest, reply_handle
from gateway.i18n import Locale
from gateway.turns.replies import scheduled_failure
from gateway.work import TurnOutcome, WorkItem

__all__ = ["TurnPlan"]


@dataclass(frozen=True, slots=True)
class TurnPlan:
    items: Sequence[WorkItem]
    request: TurnRequest
    channel: str
    chat_id: str
    run_id: str
    reply_to: str

    @classmethod
    def of(cls, items: Sequence[WorkItem]) -> TurnPlan:
        first = items[0].message
        return cls(
            items,
            first.request,
            first.channel,
            first.chat_id,
            f"{random.getrandbits(48):012x}",  # for logs: unique enough, no syscall
            reply_handle(items[-1].message),
        )

    @property
    def inbox_ids(self) -> tuple[int, ...]:
        return tuple(i.inbox_id for i in self.items)

    @property
    def locale(self) -> Locale:
        """The gateway's texts answer the latest message of the turn."""
        return self.items[-1].locale

    @property
    def silent(self) -> bool:
        """A job that reports only its failures: nothing shows while it runs."""
        return self.request.delivery is Delivery.FAILURES_ONLY

    def deliver(self, outcome: TurnOutcome, text: str) -> tuple[str, str]:
        """(chat, text) the reply goes to under the request's delivery policy;
        an empty text sends nothing."""
        request = self.request
        if self.silent:
            notice = "" if outcome.ok else scheduled_failure(self.locale, request.job_id, text)
            return request.notify_chat_id or self.chat_id, notice
        return self.chat_id, text

    def working(self, session_id: str) -> ChannelEvent:
        """The event the turn's typing, progress and deltas are sent as."""
        return ChannelEvent(
            EventKind.WORKING, self.channel, self.chat_id, session_id, self.run_id, "",
            self.reply_to,
        )  # fmt: skip
