"""Whether one channel's platform is taking our sends, as its sender sees it.

A channel is *degraded* once `DEGRADED_AFTER` sends in a row failed with no
answer from the platform (network errors, 5xx, timeouts: `Decision.outage`).
Two, not one, so that a single lost request or one row the platform keeps
choking on does not stop a whole channel. While degraded the sender sends
nothing but one probe row when `next_probe_at` comes, the wait growing like a
row's backoff (capped at `outbound_retry_max_secs`); the first answer of the
platform (a success, but also a refusal or a rate limit: the API is up) ends
the episode. The state lives in memory: a restarted gateway simply tries again.
Beside it, the last send that failed (for whatever reason) and the last that
went, for the operator's console.

This module only keeps the state; the dispatcher logs, counts and stores.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from gateway.delivery.policy import RetryPolicy, backoff_secs

__all__ = ["DEGRADED_AFTER", "ChannelHealth"]

DEGRADED_AFTER = 2
_REASON_CHARS = 160


@dataclass(slots=True)
class ChannelHealth:
    failures: int = 0  # sends in a row the platform did not answer
    degraded_since: datetime | None = None
    next_probe_at: datetime | None = None
    last_error: str = ""  # of the outage: what /ready says
    last_failure: str = ""  # the last failed send, an outage or a refusal
    last_failure_at: datetime | None = None
    last_sent_at: datetime | None = None

    @property
    def degraded(self) -> bool:
        return self.degraded_since is not None

    def failed(self, reason: str, now: datetime, policy: RetryPolicy) -> bool:
        """A send got no answer; True when this starts a degraded episode."""
        self.failures += 1
        self.last_error = reason
        starts = not self.degraded and self.failures >= DEGRADED_AFTER
        if starts:
            self.degraded_since = now
        if self.degraded:
            self.next_probe_at = now + timedelta(seconds=backoff_secs(policy, self.failures))
        return starts

    def answered(self, now: datetime) -> float | None:
        """The platform answered a send; if that ends a degraded episode, how
        long it lasted (seconds), else None."""
        since = self.degraded_since
        self.failures = 0
        self.degraded_since = self.next_probe_at = None
        return None if since is None else (now - since).total_seconds()

    def sent(self, now: datetime) -> None:
        self.last_sent_at = now

    def send_failed(self, reason: str, now: datetime) -> None:
        """Any failed send (`failed` counts only those the platform did not answer)."""
        self.last_failure, self.last_failure_at = reason, now

    def probe_due(self, now: datetime) -> bool:
        return self.next_probe_at is None or now >= self.next_probe_at

    def not_ready_reason(self) -> str | None:
        """What /ready says about this channel's sending; None when healthy."""
        if self.degraded_since is None:
            return None
        since = self.degraded_since.strftime("%Y-%m-%dT%H:%M:%SZ")
        return (
            f"sending degraded since {since} after {self.failures} failed sends "
            f"(last: {self.last_error[:_REASON_CHARS]}); replies wait and are retried"
        )
