"""Configuration of the wechat channel (`channels.wechat`)."""

from __future__ import annotations

from channels.base import ChannelSettings


class WechatConfig(ChannelSettings):
    """Placeholder until the wechat adapter lands: only the shared keys."""
