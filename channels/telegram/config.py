"""Configuration of the telegram channel (`channels.telegram`)."""

from __future__ import annotations

from channels.base import ChannelSettings


class TelegramConfig(ChannelSettings):
    """Placeholder until the telegram adapter lands: only the shared keys."""
