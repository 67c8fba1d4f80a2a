"""Texts the gateway writes itself: the late-reply note, provider failures."""

from __future__ import annotations

from agent.providers.base import ProviderKeyMissing, ProviderUnavailable
from gateway.i18n import Locale, Msg, tr
from gateway.turns.replies import format_duration, late_note, user_facing_error


def test_durations_read_in_two_units_at_most() -> None:
    assert [format_duration(s) for s in (0.4, 45, 720, 3_900, 7_200, 190_000, 172_800)] == [
        "0 s",
        "45 s",
        "12 min",
        "1 h 5 min",
        "2 h",
        "2 d 4 h",
        "2 d",
    ]


def test_the_late_note_is_a_paragraph_of_its_own() -> None:
    assert late_note(3_900) == (
        "\n\n(Sent late: this reply was written 1 h 5 min ago and could not be delivered until now.)"
    )


def test_the_late_note_and_durations_in_chinese() -> None:
    assert [format_duration(s, Locale.ZH_CN) for s in (45, 3_900, 172_800)] == [
        "45 秒",
        "1 小时 5 分钟",
        "2 天",
    ]
    assert late_note(3_900, Locale.ZH_CN) == (
        "\n\n（延迟送达：这条回复写于 1 小时 5 分钟前，直到现在才送达。）"
    )


def test_provider_failures_in_both_languages() -> None:
    missing = ProviderKeyMissing("default", "OPENAI_API_KEY (providers.default.api_key)")
    assert user_facing_error(Locale.EN, missing) == (
        "The gateway is not set up to answer yet: the model provider 'default' has no API key. "
        "Ask the operator to set OPENAI_API_KEY (providers.default.api_key)."
    )
    assert "OPENAI_API_KEY" in user_facing_error(Locale.ZH_CN, missing)
    assert user_facing_error(Locale.ZH_CN, ProviderUnavailable("503")) == tr(
        Locale.ZH_CN, Msg.PROVIDER_UNAVAILABLE
    )
