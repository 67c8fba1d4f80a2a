"""When a chat's next message starts a new session: after idle time, or daily.

`gateway.session_ttl_secs` (a session idle that long) and
`gateway.session_reset_at` (the first message after that local time each day),
each overridable per channel. A policy turns "now" into a cutoff: a session
last active before it is archived and a new one begins
(`storage.sql.conversations.turns.begin_turn`). The clock is injected so that tests can move
through the reset time; it must return timezone-aware datetimes. Storage
stamps activity with the real time, so any other clock may only run ahead of
it (which is what a test needs to cross a reset).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta, tzinfo

from channels.base import ChannelSettings
from gateway.config.core import GatewayConfig

__all__ = ["NEVER", "ResetPolicy", "reset_policy"]


@dataclass(frozen=True, slots=True)
class ResetPolicy:
    ttl_secs: float = 0.0  # 0: no idle limit
    daily_at: time | None = None  # local time of day in `zone`
    zone: tzinfo = UTC

    @property
    def enabled(self) -> bool:
        return self.ttl_secs > 0 or self.daily_at is not None

    def cutoff(self, now: datetime) -> datetime | None:
        """Sessions last active before this moment start afresh; None: never."""
        if now.tzinfo is None:
            raise ValueError("the clock must return timezone-aware datetimes")
        moments: list[datetime] = []
        if self.ttl_secs > 0:
            moments.append(now - timedelta(seconds=self.ttl_secs))
        if self.daily_at is not None:
            moments.append(self._last_reset(now))
        return max(moments) if moments else None

    def _last_reset(self, now: datetime) -> datetime:
        """The latest daily reset moment at or before `now` (wall-clock time in
        the zone, so it stays at 04:00 across daylight saving changes)."""
        assert self.daily_at is not None
        local = now.astimezone(self.zone)
        moment = datetime.combine(local.date(), self.daily_at, tzinfo=self.zone)
        if moment > local:
            moment = datetime.combine(local.date() - timedelta(days=1), self.daily_at, self.zone)
        return moment


NEVER = ResetPolicy()


def _daily(value: str | None) -> time | None:
    if value is None or value == "off":
        return None
    hours, minutes = value.split(":")
    return time(int(hours), int(minutes))


def reset_policy(
    gateway: GatewayConfig, channel: ChannelSettings | None, zone: tzinfo
) -> ResetPolicy:
    """The policy of one channel: its own keys where set, else the gateway's."""
    ttl = gateway.session_ttl_secs
    daily = gateway.session_reset_at
    if channel is not None:
        if channel.session_ttl_secs is not None:
            ttl = channel.session_ttl_secs
        if channel.session_reset_at is not None:
            daily = channel.session_reset_at
    return ResetPolicy(ttl, _daily(daily), zone)
