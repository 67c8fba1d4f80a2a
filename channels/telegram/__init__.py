"""The Telegram channel (python-telegram-bot 22, Bot API over long polling or webhook).

`TelegramChannel` (and python-telegram-bot with it) loads on first use
(channels.lazy): the config model alone does not need the SDK.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

# PTB 22.2+ warns on every time-period attribute (e.g. RetryAfter.retry_after, even
# inside its own constructor) unless this opt-in to the future timedelta type is set.
# It only changes PTB's behaviour, and our code reads both forms.
os.environ.setdefault("PTB_TIMEDELTA", "true")

from channels.lazy import lazy_exports
from channels.telegram.config import TelegramConfig

if TYPE_CHECKING:
    from channels.telegram.channel import TelegramChannel

__all__ = ["TelegramChannel", "TelegramConfig"]

__getattr__ = lazy_exports(__name__, {"TelegramChannel": "channel"})
