"""Who pays for a model call, and the day and month it is counted in.

The code that starts model calls on someone's behalf says so once, around
them: `with paying(Payer(...)):` (a turn in gateway.turns.execution,
background compaction, memory maintenance). Every call made inside, by the
agent loop, a sub-agent or a compaction, is charged to that payer by
gateway.spend.provider, which reads `PAYER`. A call made outside any payer is
charged to its agent and the deployment only (`UNKNOWN_PAYER`). An empty
`sender_id` or `chat_id` means not known: that scope is not charged.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from gateway.i18n import Locale

__all__ = ["PAYER", "UNKNOWN_PAYER", "Payer", "Periods", "local_days", "paying"]


@dataclass(frozen=True, slots=True)
class Payer:
    channel: str
    chat_id: str
    sender_id: str
    admin: bool = False
    locale: Locale = Locale.EN
    kind: str = "turn"  # turn | compaction | memory (the usage log's kind)
    gated: bool = True  # a call may be refused over a budget; False: only charged
    run_id: str | None = None

    @property
    def sender_key(self) -> str:
        return f"{self.channel}:{self.sender_id}"

    @property
    def chat_key(self) -> str:
        return f"{self.channel}:{self.chat_id}"


UNKNOWN_PAYER = Payer("", "", "", gated=False, kind="other")

PAYER: ContextVar[Payer | None] = ContextVar("picobot_payer", default=None)


@contextmanager
def paying(payer: Payer) -> Iterator[None]:
    token = PAYER.set(payer)
    try:
        yield
    finally:
        PAYER.reset(token)


@dataclass(frozen=True, slots=True)
class Periods:
    """The local day and month of a moment (`time.timezone`), as stored keys,
    and when each ends."""

    day: str  # "day:2026-12-07"
    month: str  # "month:2026-12"
    date: str  # "2026-12-07"
    day_ends: datetime
    month_ends: datetime

    @classmethod
    def of(cls, now: datetime, zone: ZoneInfo) -> Periods:
        local = now.astimezone(zone)
        midnight = local.replace(hour=0, minute=0, second=0, microsecond=0)
        next_day = midnight + timedelta(days=1)  # wall-clock arithmetic: DST days too
        first = midnight.replace(day=1)
        next_month = (first + timedelta(days=32)).replace(day=1)
        return cls(
            f"day:{local:%Y-%m-%d}",
            f"month:{local:%Y-%m}",
            f"{local:%Y-%m-%d}",
            next_day,
            next_month,
        )

    def key(self, field: str) -> str:
        """The period a budget field is counted in."""
        return self.day if field.startswith("daily") else self.month

    def ends(self, field: str) -> datetime:
        return self.day_ends if field.startswith("daily") else self.month_ends


def local_days(now: datetime, zone: ZoneInfo, days: int) -> tuple[date, date]:
    """The first and the last of the last `days` local dates (`time.timezone`),
    today the last: what `picobot usage --days` and the console's usage view
    report on."""
    today = now.astimezone(zone).date()
    return today - timedelta(days=days - 1), today
