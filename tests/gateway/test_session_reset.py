"""Reset policies: idle time and the daily reset time, with explicit clocks."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from gateway.config.loading import parse_config
from gateway.turns.session_reset import NEVER, ResetPolicy, reset_policy
from storage.clock import iso
from storage.sql.conversations.turns import SessionReset

SHANGHAI = ZoneInfo("Asia/Shanghai")
BERLIN = ZoneInfo("Europe/Berlin")


def local(zone: ZoneInfo, *args: int) -> datetime:
    return datetime(*args, tzinfo=zone)  # type: ignore[misc]


def test_idle_time_is_counted_back_from_now() -> None:
    now = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
    assert ResetPolicy(ttl_secs=2).cutoff(now) == now - timedelta(seconds=2)
    assert NEVER.cutoff(now) is None
    assert not NEVER.enabled


@pytest.mark.parametrize(
    ("now", "last_reset"),
    [
        ((2025, 6, 2, 3, 59), (2025, 6, 1, 4, 0)),  # before today's: yesterday's
        ((2025, 6, 2, 4, 0), (2025, 6, 2, 4, 0)),
        ((2025, 6, 2, 23, 30), (2025, 6, 2, 4, 0)),
    ],
)
def test_the_daily_reset_is_the_latest_reset_time_in_the_zone(
    now: tuple[int, ...], last_reset: tuple[int, ...]
) -> None:
    policy = ResetPolicy(daily_at=time(4, 0), zone=SHANGHAI)
    moment = local(SHANGHAI, *now).astimezone(UTC)  # the clock may be in any zone
    assert policy.cutoff(moment) == local(SHANGHAI, *last_reset)


def test_the_daily_reset_keeps_its_wall_clock_time_across_daylight_saving() -> None:
    policy = ResetPolicy(daily_at=time(4, 0), zone=BERLIN)
    # 30 March 2025: clocks go from 02:00 to 03:00; 04:00 is now 02:00 UTC, not 03:00
    cutoff = policy.cutoff(local(BERLIN, 2025, 3, 30, 10, 0))
    assert cutoff is not None
    assert cutoff.astimezone(UTC) == datetime(2025, 3, 30, 2, 0, tzinfo=UTC)


def test_only_the_first_message_after_the_reset_time_starts_a_new_session() -> None:
    policy = ResetPolicy(daily_at=time(4, 0), zone=SHANGHAI)

    def due(last_active: datetime, now: datetime) -> bool:
        cutoff = policy.cutoff(now)
        assert cutoff is not None
        return SessionReset(cutoff, "").due(iso(last_active))

    night = local(SHANGHAI, 2025, 6, 2, 1, 0)
    first = local(SHANGHAI, 2025, 6, 2, 4, 5)
    assert due(night, first)  # the first message after 04:00
    assert not due(first, local(SHANGHAI, 2025, 6, 2, 4, 6))  # the next one: same session
    assert not due(first, local(SHANGHAI, 2025, 6, 2, 23, 59))
    assert due(first, local(SHANGHAI, 2025, 6, 3, 4, 1))  # the next day


def test_with_both_whichever_came_last_is_the_cutoff() -> None:
    policy = ResetPolicy(ttl_secs=3600, daily_at=time(4, 0), zone=SHANGHAI)
    assert policy.cutoff(local(SHANGHAI, 2025, 6, 2, 4, 30)) == local(SHANGHAI, 2025, 6, 2, 4, 0)
    assert policy.cutoff(local(SHANGHAI, 2025, 6, 2, 9, 0)) == local(SHANGHAI, 2025, 6, 2, 8, 0)


def test_a_naive_clock_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        ResetPolicy(ttl_secs=1).cutoff(datetime(2025, 6, 1))


def test_channels_override_the_gateway_keys() -> None:
    config, _ = parse_config(
        {
            "gateway": {"session_ttl_secs": 60, "session_reset_at": "04:00"},
            "time": {"timezone": "Asia/Shanghai"},
            "channels": {
                "websocket": {"session_ttl_secs": 0, "session_reset_at": "off"},
                "telegram": {"enabled": True, "token": "x", "session_reset_at": "06:30"},
            },
        },
        {},
    )
    zone = config.time.zone
    ws = reset_policy(config.gateway, config.channels.websocket, zone)
    assert not ws.enabled
    telegram = reset_policy(config.gateway, config.channels.telegram, zone)
    assert (telegram.ttl_secs, telegram.daily_at, telegram.zone) == (60, time(6, 30), zone)
    assert reset_policy(config.gateway, None, zone).daily_at == time(4, 0)


@pytest.mark.parametrize("value", ["4:00", "24:00", "04:60", "noon", ""])
def test_a_reset_time_that_is_not_hh_mm_is_refused(value: str) -> None:
    from gateway.config.core import ConfigError

    with pytest.raises(ConfigError, match=r"gateway\.session_reset_at: .*HH:MM"):
        parse_config({"gateway": {"session_reset_at": value}}, {})


def test_only_turns_a_person_asked_for_are_reset() -> None:
    from gateway.bus import Origin
    from gateway.turns.chat_policy import ChatPolicy

    policy = ChatPolicy(ResetPolicy(ttl_secs=60))
    now = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
    for origin in (Origin.CHAT, Origin.WEB):
        reset = policy.session_reset(origin, now)
        assert reset is not None
        assert reset.before == now - timedelta(seconds=60)
    assert policy.session_reset(Origin.SCHEDULER, now) is None
    assert policy.session_reset(Origin.SUBAGENT, now) is None
    assert ChatPolicy().session_reset(Origin.CHAT, now) is None
