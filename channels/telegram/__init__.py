"""The Telegram channel (python-telegram-bot 22, Bot API over long polling or webhook)."""

from __future__ import annotations

import os

# PTB 22.2+ warns on every time-period attribute (e.g. RetryAfter.retry_after, even
# inside its own constructor) unless this opt-in to the future timedelta type is set.
# It only changes PTB's behaviour, and our code reads both forms.
os.environ.setdefault("PTB_TIMEDELTA", "true")

from channels.telegram.channel import TelegramChannel
from channels.telegram.config import TelegramConfig

__all__ = ["TelegramChannel", "TelegramConfig"]
