"""Configuration of the feishu channel (`channels.feishu`)."""

from __future__ import annotations

from channels.base import ChannelSettings


class FeishuConfig(ChannelSettings):
    """Placeholder until the feishu adapter lands: only the shared keys."""
