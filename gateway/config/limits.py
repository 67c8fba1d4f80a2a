"""`limits`: how much one sender may ask, and how much anyone may spend
(docs/limits.md).

    "limits": {
      "sender": {"messages_per_minute": 10, "daily_tokens": 200000},
      "chat": {"monthly_cost": 20},
      "agent": {},
      "total": {"monthly_cost": 100},
      "users": {"telegram:42": {"daily_tokens": 1000000}},
      "chats": {"feishu:oc_team": {"daily_tokens": 2000000}},
      "admins_exempt": true,
      "notice_ratio": 0.8,
      "admin_chat": {"channel": "telegram", "chat_id": "42"}
    }

A sender's messages over a rate are recorded, then answered with a reply
saying so instead of a turn (gateway/access/rate.py); commands are never
counted. Budgets (tokens and cost per day and per month, days in
`time.timezone`) are kept per sender, chat, agent and for the whole
deployment (gateway/spend/); `users` and `chats` replace the defaults of one
sender or chat field by field, and `/limits` or `picobot limits` set more at
run time (stored; they win over the file).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gateway.config.agents import FrozenModel

__all__ = [
    "BUDGET_FIELDS",
    "AdminChat",
    "Budget",
    "BudgetField",
    "LimitsConfig",
    "Scope",
    "SenderLimits",
]

Scope = Literal["sender", "chat", "agent", "total"]
BudgetField = Literal["daily_tokens", "monthly_tokens", "daily_cost", "monthly_cost"]
BUDGET_FIELDS: tuple[BudgetField, ...] = (
    "daily_tokens",
    "monthly_tokens",
    "daily_cost",
    "monthly_cost",
)


class Budget(FrozenModel):
    """Tokens (input + output of every model call) and cost (at
    `models.<name>.prices`) per day and per month; null: no limit."""

    daily_tokens: int | None = Field(None, ge=0)
    monthly_tokens: int | None = Field(None, ge=0)
    daily_cost: float | None = Field(None, ge=0)
    monthly_cost: float | None = Field(None, ge=0)

    def values(self) -> dict[BudgetField, float | None]:
        return {name: getattr(self, name) for name in BUDGET_FIELDS}


class SenderLimits(Budget):
    """Per sender (their id on a channel), across all their chats; null: no limit."""

    messages_per_minute: int | None = Field(None, ge=1)
    messages_per_hour: int | None = Field(None, ge=1)


class AdminChat(FrozenModel):
    """Where admins hear that someone crossed a budget."""

    channel: str = Field(min_length=1)
    chat_id: str = Field(min_length=1)


class LimitsConfig(FrozenModel):
    sender: SenderLimits = Field(default_factory=SenderLimits)
    chat: Budget = Field(default_factory=Budget)
    agent: Budget = Field(default_factory=Budget)  # per agents.<name>, each on its own
    total: Budget = Field(default_factory=Budget)  # the whole deployment
    # "channel:sender_id" → that sender's own budget (replaces limits.sender's, field by field)
    users: dict[str, Budget] = Field(default_factory=dict)
    # "channel:chat_id" → that chat's own budget (replaces limits.chat's, field by field)
    chats: dict[str, Budget] = Field(default_factory=dict)
    # a message over its sender's rate: "refuse" answers it with a reply saying
    # so; "later" says when it will be answered, keeps it and answers it then
    over_rate: Literal["refuse", "later"] = "refuse"
    max_waiting_per_sender: int = Field(10, ge=1)  # "later": past this, refused
    # gateway.admins and PICOBOT_ADMINS are never rate-limited nor stopped by a budget
    admins_exempt: bool = True
    notice_ratio: float = Field(0.8, gt=0, le=1)  # one notice when this share is spent
    admin_chat: AdminChat | None = None  # where budget crossings are reported
    usage_retention_days: int = Field(400, ge=1)  # usage rows kept for reports

    def defaults(self, scope: Scope) -> Budget:
        return {"sender": self.sender, "chat": self.chat, "agent": self.agent}.get(
            scope, self.total
        )

    def overrides(self, scope: Scope) -> dict[str, Budget]:
        return {"sender": self.users, "chat": self.chats}.get(scope, {})

    @property
    def has_budgets(self) -> bool:
        budgets = [self.sender, self.chat, self.agent, self.total, *self.users.values()]
        budgets += self.chats.values()
        return any(v is not None for b in budgets for v in b.values().values())
