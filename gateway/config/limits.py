"""`limits`: how much one sender may ask (docs/limits.md).

    "limits": {
      "sender": {"messages_per_minute": 10, "messages_per_hour": 100},
      "admins_exempt": true
    }

A sender's messages over a rate are recorded, then answered with a reply
saying so instead of a turn (gateway/access/rate.py); commands are never
counted. Budgets of tokens and cost are not part of it yet.
"""

from __future__ import annotations

from pydantic import Field

from gateway.config.agents import FrozenModel

__all__ = ["LimitsConfig", "SenderLimits"]


class SenderLimits(FrozenModel):
    """Per sender (their id on a channel), across all their chats; null: no limit."""

    messages_per_minute: int | None = Field(None, ge=1)
    messages_per_hour: int | None = Field(None, ge=1)


class LimitsConfig(FrozenModel):
    sender: SenderLimits = Field(default_factory=SenderLimits)
    admins_exempt: bool = True  # gateway.admins and PICOBOT_ADMINS are never rate-limited
