"""The retry policy of outbound delivery: what to do with a row whose send failed.

`classify_failure` is the one function that branches on the channel error
type. A row ends by time, never by attempt count: transient failures retry
with capped exponential backoff until `give_up_after_secs` have passed since
the row was queued; a permanent error fails it at once. Each decision also
says whether the failure is evidence that the platform itself is down
(`outage`), which is what marks a channel degraded (gateway.delivery.health).

`with_late_note` decides whether a reply that waited long says so.

This module decides; it never sends, stores or sleeps.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from enum import StrEnum

import structlog

from channels.base import PermanentSendError, RateLimited, RecipientOffline, TransientSendError
from gateway.bus import OutboundMessage
from gateway.i18n import Locale, parse_locale
from gateway.turns.replies import late_note

__all__ = [
    "Action",
    "Decision",
    "RetryPolicy",
    "backoff_secs",
    "classify_failure",
    "gave_up",
    "with_late_note",
]

log = structlog.get_logger(__name__)

_REASON_CHARS = 500


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    base_secs: float = 1.0
    max_secs: float = 300.0
    give_up_after_secs: float = 86_400.0
    stale_notice_secs: float = 600.0  # 0: never add the late note


class Action(StrEnum):
    RETRY = "retry"
    PARK = "park"  # the recipient is offline: wait for it, not for a timer
    FAIL = "fail"


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    delay: float = 0.0
    reason: str = ""
    outage: bool = False  # the platform did not answer (as opposed to answering "no")


def backoff_secs(policy: RetryPolicy, failures: int) -> float:
    """The wait after the `failures`-th failure in a row: doubling from
    `base_secs`, capped at `max_secs`, with jitter so that rows (and
    gateways) do not retry in lockstep."""
    exponent = min(max(failures, 1) - 1, 60)  # 2**60 s is past any cap
    capped = min(policy.max_secs, policy.base_secs * 2.0**exponent)
    return capped * random.uniform(0.5, 1.0)


def gave_up(policy: RetryPolicy, last_error: str) -> str:
    """The reason stored on a row that ran out of time."""
    return (
        f"gave up: not delivered within {policy.give_up_after_secs:g} s of being queued "
        f"(gateway.outbound_give_up_after_secs); last error: {last_error}"
    )[:_REASON_CHARS]


def classify_failure(
    exc: BaseException, attempts_so_far: int, waited_secs: float, policy: RetryPolicy
) -> Decision:
    """What to do with a row whose send raised `exc` after `attempts_so_far`
    earlier tries, `waited_secs` after it was queued."""
    reason = f"{type(exc).__name__}: {exc}"[:_REASON_CHARS]
    if isinstance(exc, RecipientOffline):
        return Decision(Action.PARK, reason=reason)
    if isinstance(exc, PermanentSendError):
        return Decision(Action.FAIL, reason=reason)
    # A rate limit is the platform answering: it slows this row down, it is no outage.
    outage = not isinstance(exc, RateLimited)
    left = policy.give_up_after_secs - waited_secs
    if left <= 0:
        return Decision(Action.FAIL, reason=gave_up(policy, reason), outage=outage)
    if isinstance(exc, RateLimited):
        delay = max(0.0, exc.retry_after)
    else:
        if not isinstance(exc, TransientSendError | TimeoutError):
            log.error("send_unexpected_error", error=reason)
        delay = backoff_secs(policy, attempts_so_far + 1)
    # one last try at the deadline rather than a give-up long after it
    return Decision(Action.RETRY, min(delay, left), reason, outage)


def with_late_note(
    message: OutboundMessage, waited_secs: float, policy: RetryPolicy, channel_locale: Locale
) -> OutboundMessage:
    """`message`, written `waited_secs` ago, with the late note if that is long: in
    the message's locale (that of the message it answers), else the channel's."""
    notice_after = policy.stale_notice_secs
    if notice_after <= 0 or waited_secs < notice_after or not message.text.strip():
        return message
    locale = parse_locale(message.locale) or channel_locale
    return dataclasses.replace(message, text=message.text + late_note(waited_secs, locale))
