"""Which language the gateway's own texts take for a message (gateway.i18n).

`channels.<name>.locale`, else `gateway.locale`; "auto" (the default) means:
the platform's language hint for the sender if the message carries one
(`InboundMessage.language`: Telegram's `from.language_code`), else
`time.timezone` — a zone of mainland China, Taiwan, Hong Kong, Macau or
Singapore gives zh-CN, any other en. A hint in another language than the two
we have gives en: a French speaker reads English more likely than Chinese.

Resolved once per inbound message, when the inbound processor makes its
`WorkItem` (and again for a recovered row: the hint is stored with it); what
writes a reply reads `WorkItem.locale`, and a reply's outbox row keeps it
(`OutboundMessage.locale`) for the late note added at send time. Texts with
no message behind them (a scheduler timeout, a pairing approval sent to
another chat) take the channel's locale (`for_channel`). Never reads the
environment or a clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from gateway.bus import InboundMessage
from gateway.config.core import Config
from gateway.i18n import Locale

__all__ = ["AUTO", "CHINESE_ZONES", "DEFAULT_LOCALES", "LocaleResolver", "hint_locale"]

AUTO: Final = "auto"

# IANA names (and their old aliases) of the places where people read Chinese
# first: mainland China, Taiwan, Hong Kong, Macau, Singapore.
CHINESE_ZONES: Final = frozenset({
    "Asia/Shanghai", "Asia/Chongqing", "Asia/Chungking", "Asia/Harbin", "Asia/Urumqi",
    "Asia/Kashgar", "PRC", "Asia/Taipei", "ROC", "Asia/Hong_Kong", "Hongkong",
    "Asia/Macau", "Asia/Macao", "Asia/Singapore", "Singapore",
})  # fmt: skip


def hint_locale(hint: str | None) -> Locale | None:
    """The locale a platform's language tag asks for ("zh-hans", "zh_CN",
    "en-GB", "fr"); None when there is no tag."""
    tag = (hint or "").strip().lower().replace("_", "-")
    if not tag:
        return None
    return Locale.ZH_CN if tag == "zh" or tag.startswith("zh-") else Locale.EN


def zone_locale(zone: str) -> Locale:
    return Locale.ZH_CN if zone in CHINESE_ZONES else Locale.EN


@dataclass(frozen=True, slots=True)
class LocaleResolver:
    gateway: str = AUTO  # gateway.locale
    channels: Mapping[str, str] = field(default_factory=dict)  # channels.<name>.locale when set
    zone: Locale = Locale.EN  # what time.timezone says

    @classmethod
    def from_config(cls, config: Config) -> LocaleResolver:
        channels = {
            name: settings.locale
            for name, settings in config.channels.enabled().items()
            if settings.locale is not None
        }
        return cls(config.gateway.locale, channels, zone_locale(config.time.timezone))

    def _setting(self, channel: str) -> Locale | None:
        setting = self.channels.get(channel, self.gateway)
        return None if setting == AUTO else Locale(setting)

    def resolve(self, message: InboundMessage) -> Locale:
        """The locale of the texts written in answer to `message`."""
        return self._setting(message.channel) or hint_locale(message.language) or self.zone

    @property
    def fallback(self) -> Locale:
        """The locale with neither a channel nor a message: `gateway.locale`, else the zone."""
        return Locale(self.gateway) if self.gateway != AUTO else self.zone

    def for_channel(self, channel: str) -> Locale:
        """The locale of a text for a chat of `channel` with no message behind it."""
        return self._setting(channel) or self.zone


DEFAULT_LOCALES: Final = LocaleResolver()
