"""The outbound retry policy and a channel's health: rows end by time, never
by attempt count; two unanswered sends in a row degrade a channel, any answer
of the platform ends it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from channels.base import PermanentSendError, RateLimited, RecipientOffline, TransientSendError
from gateway.bus import OutboundMessage
from gateway.delivery.health import ChannelHealth
from gateway.delivery.policy import (
    Action,
    RetryPolicy,
    backoff_secs,
    classify_failure,
    with_late_note,
)
from gateway.i18n import Locale, Msg, tr

POLICY = RetryPolicy(base_secs=1.0, max_secs=300.0, give_up_after_secs=3_600.0)
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def test_transient_failures_retry_whatever_the_attempt_count() -> None:
    decision = classify_failure(TransientSendError("502"), 10_000, 60.0, POLICY)
    assert decision.action is Action.RETRY
    assert decision.outage
    assert 150.0 <= decision.delay <= 300.0  # capped backoff, with jitter


def test_timeouts_and_unexpected_errors_are_transient_too() -> None:
    for exc in (TimeoutError(), KeyError("bug")):
        decision = classify_failure(exc, 0, 0.0, POLICY)
        assert (decision.action, decision.outage) == (Action.RETRY, True)


def test_out_of_time_fails_saying_so() -> None:
    decision = classify_failure(TransientSendError("telegram: Bad Gateway"), 3, 3_600.0, POLICY)
    assert decision.action is Action.FAIL
    assert decision.reason.startswith("gave up: not delivered within 3600 s of being queued")
    assert decision.reason.endswith("last error: TransientSendError: telegram: Bad Gateway")


def test_the_last_retry_is_at_the_deadline_not_after_it() -> None:
    decision = classify_failure(TransientSendError("down"), 20, 3_590.0, POLICY)
    assert decision.action is Action.RETRY
    assert decision.delay == pytest.approx(10.0)


def test_a_permanent_error_fails_at_once_and_is_no_outage() -> None:
    decision = classify_failure(PermanentSendError("bot was blocked by the user"), 0, 0.0, POLICY)
    assert decision.action is Action.FAIL
    assert decision.reason == "PermanentSendError: bot was blocked by the user"
    assert not decision.outage


def test_rate_limits_wait_the_platforms_delay_and_are_no_outage() -> None:
    decision = classify_failure(RateLimited("slow down", 7.0), 50, 10.0, POLICY)
    assert (decision.action, decision.delay, decision.outage) == (Action.RETRY, 7.0, False)


def test_an_offline_recipient_parks_the_row() -> None:
    decision = classify_failure(RecipientOffline("nobody connected"), 0, 0.0, POLICY)
    assert (decision.action, decision.outage) == (Action.PARK, False)


def test_backoff_doubles_up_to_the_cap() -> None:
    assert 0.5 <= backoff_secs(POLICY, 1) <= 1.0
    assert 4.0 <= backoff_secs(POLICY, 4) <= 8.0
    assert 150.0 <= backoff_secs(POLICY, 10_000) <= 300.0


def test_one_unanswered_send_is_no_outage_two_in_a_row_are() -> None:
    health = ChannelHealth()
    assert not health.failed("TransientSendError: 502", T0, POLICY)
    assert not health.degraded
    assert health.answered(T0) is None  # a success in between: counting starts again
    assert not health.failed("TransientSendError: 502", T0, POLICY)
    assert health.failed("TransientSendError: 502", T0 + timedelta(seconds=1), POLICY)
    assert health.degraded
    assert not health.failed("TransientSendError: 502", T0 + timedelta(seconds=3), POLICY)
    reason = health.not_ready_reason()
    assert reason is not None
    assert reason.startswith("sending degraded since 2026-01-01T12:00:01Z after 3 failed sends")
    assert "TransientSendError: 502" in reason


def test_probes_are_spaced_by_the_capped_backoff() -> None:
    health = ChannelHealth()
    now = T0
    for _ in range(20):
        health.failed("down", now, POLICY)
    assert health.next_probe_at is not None
    wait = (health.next_probe_at - now).total_seconds()
    assert 150.0 <= wait <= 300.0
    assert not health.probe_due(now)
    assert health.probe_due(health.next_probe_at)


def test_an_answer_ends_the_episode_and_says_how_long_it_lasted() -> None:
    health = ChannelHealth()
    health.failed("down", T0, POLICY)
    health.failed("down", T0, POLICY)
    assert health.answered(T0 + timedelta(seconds=90)) == 90.0
    assert not health.degraded
    assert health.not_ready_reason() is None


def test_a_reply_that_waited_long_says_so_unless_the_note_is_off() -> None:
    message = OutboundMessage(channel="tg", chat_id="42", text="the answer")
    policy = RetryPolicy(stale_notice_secs=600.0)
    en = Locale.EN
    assert with_late_note(message, 599.0, policy, en) is message
    late = with_late_note(message, 3_900.0, policy, en).text
    assert late == "the answer\n\n(Sent late: this reply was written 1 h 5 min ago" + (
        " and could not be delivered until now.)"
    )
    assert with_late_note(message, 3_900.0, RetryPolicy(stale_notice_secs=0), en) is message
    empty = OutboundMessage(channel="tg", chat_id="42", text="  ")
    assert with_late_note(empty, 3_900.0, policy, en) is empty


def test_the_late_note_speaks_the_language_of_the_reply_else_the_channels() -> None:
    policy = RetryPolicy(stale_notice_secs=600.0)
    chinese = OutboundMessage(channel="tg", chat_id="42", text="答案", locale="zh-CN")
    note = tr(Locale.ZH_CN, Msg.LATE_NOTE, waited="1 小时 5 分钟")
    assert with_late_note(chinese, 3_900.0, policy, Locale.EN).text == f"答案\n\n{note}"
    plain = OutboundMessage(channel="tg", chat_id="42", text="答案")  # no locale: the channel's
    assert with_late_note(plain, 3_900.0, policy, Locale.ZH_CN).text == f"答案\n\n{note}"
    odd = OutboundMessage(
        channel="tg", chat_id="42", text="x", locale="fr"
    )  # unknown: the channel's
    assert "Sent late" in with_late_note(odd, 3_900.0, policy, Locale.EN).text
