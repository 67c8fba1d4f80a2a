"""Which language a message's texts take: channel, then gateway, then the
platform's hint, then the time zone."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.bus import InboundMessage
from gateway.i18n import Locale
from gateway.i18n.locales import LocaleResolver, hint_locale
from tests.support import make_config


def message(channel: str = "telegram", language: str | None = None) -> InboundMessage:
    return InboundMessage(channel, "42", "42", "/help", "1", language=language)


@pytest.mark.parametrize(
    ("hint", "locale"),
    [
        ("zh-hans", Locale.ZH_CN),
        ("zh_CN", Locale.ZH_CN),
        ("zh", Locale.ZH_CN),
        ("ZH-TW", Locale.ZH_CN),
        ("en", Locale.EN),
        ("en-GB", Locale.EN),
        ("fr", Locale.EN),  # a language we have no texts in: English
        ("zhx", Locale.EN),
        ("", None),
        (None, None),
    ],
)
def test_platform_language_tags(hint: str | None, locale: Locale | None) -> None:
    assert hint_locale(hint) is locale


@pytest.mark.parametrize(
    ("zone", "locale"),
    [
        ("Asia/Shanghai", Locale.ZH_CN),
        ("Asia/Taipei", Locale.ZH_CN),
        ("Asia/Hong_Kong", Locale.ZH_CN),
        ("Asia/Singapore", Locale.ZH_CN),
        ("Asia/Urumqi", Locale.ZH_CN),
        ("Asia/Tokyo", Locale.EN),
        ("Europe/Berlin", Locale.EN),
        ("UTC", Locale.EN),
    ],
)
def test_auto_without_a_hint_follows_the_time_zone(
    tmp_path: Path, zone: str, locale: Locale
) -> None:
    config = make_config(tmp_path, "http://127.0.0.1:9", time={"timezone": zone}).config
    resolver = LocaleResolver.from_config(config)
    assert resolver.resolve(message("websocket")) is locale
    assert resolver.for_channel("websocket") is locale
    # a hint wins over the zone
    assert resolver.resolve(message(language="en")) is Locale.EN
    assert resolver.resolve(message(language="zh-hans")) is Locale.ZH_CN


def test_channel_then_gateway_then_auto(tmp_path: Path) -> None:
    config = make_config(
        tmp_path,
        "http://127.0.0.1:9",
        gateway={"locale": "zh-CN"},
        channels={"telegram": {"enabled": True, "token": "1:x", "locale": "auto"}},
        time={"timezone": "Europe/Berlin"},
    ).config
    resolver = LocaleResolver.from_config(config)
    # the gateway's fixed locale wins over any hint ...
    assert resolver.resolve(message("websocket", language="en")) is Locale.ZH_CN
    assert resolver.for_channel("websocket") is Locale.ZH_CN
    # ... except on a channel whose own locale is "auto": hint, then zone
    assert resolver.resolve(message("telegram", language="en")) is Locale.EN
    assert resolver.resolve(message("telegram")) is Locale.EN
    assert resolver.resolve(message("telegram", language="zh-hans")) is Locale.ZH_CN


def test_the_default_is_auto_in_utc() -> None:
    resolver = LocaleResolver()
    assert resolver.resolve(message()) is Locale.EN
    assert resolver.resolve(message(language="zh-hans")) is Locale.ZH_CN
