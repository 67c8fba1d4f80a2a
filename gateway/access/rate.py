"""SenderRate: how many messages one sender may send per minute and per hour
(`limits.sender`, docs/limits.md), counted in storage
(storage.sql.access.rate_events) so that a restart does not reset it and
concurrent batches cannot both pass. Commands are not counted; admins are
exempt unless `limits.admins_exempt` is false.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from gateway.bus import InboundMessage
from gateway.config.limits import LimitsConfig
from gateway.i18n import Locale, Msg, tr
from storage.sql.access.rate_events import RateLimit
from storage.store import Store

__all__ = ["OverRate", "SenderRate"]

SENDER_MINUTE_RATE = "sender_minute"  # the rate_events kinds
SENDER_HOUR_RATE = "sender_hour"


@dataclass(frozen=True, slots=True)
class OverRate:
    """The rate a message went over and when the sender has room again."""

    limit: RateLimit
    wait_secs: float

    def text(self, locale: Locale, *, later: bool = False) -> str:
        """The refusal; `later`: the note that it will be answered then instead."""
        per = Msg.PER_MINUTE if self.limit.kind == SENDER_MINUTE_RATE else Msg.PER_HOUR
        wait = max(1, math.ceil(self.wait_secs))
        key = Msg.RATE_LATER if later else Msg.RATE_LIMITED
        return tr(locale, key, limit=self.limit.count, per=tr(locale, per), wait=wait)


class SenderRate:
    def __init__(
        self,
        store: Store,
        limits: LimitsConfig,
        on_limited: Callable[[str, str], None] = lambda channel, limit: None,
    ) -> None:
        """`on_limited(channel, rate kind)`: a message went over (a metric)."""
        self.store = store
        self.on_limited = on_limited
        self.admins_exempt = limits.admins_exempt
        sender = limits.sender
        self.limits = [
            RateLimit(kind, count, window)
            for kind, count, window in (
                (SENDER_MINUTE_RATE, sender.messages_per_minute, timedelta(minutes=1)),
                (SENDER_HOUR_RATE, sender.messages_per_hour, timedelta(hours=1)),
            )
            if count is not None
        ]

    async def take(self, message: InboundMessage, admin: bool, now: datetime) -> OverRate | None:
        """Count the message against its sender; the rate it went over, if any
        (then it is counted against none)."""
        if not self.limits or (admin and self.admins_exempt):
            return None
        key = [f"{message.channel}:{message.sender_id}"]
        over = await self.store.rates.take_each(self.limits, key, now)  # one transaction
        if over is None:
            return None
        limit, wait = over
        self.on_limited(message.channel, limit.kind)
        return OverRate(limit, wait)
