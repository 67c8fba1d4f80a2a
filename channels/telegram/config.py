"""Configuration of the telegram channel (`channels.telegram`).

Validation only; the adapter reads these values once at construction. The bot
token is a `SecretStr` and must never reach a log line or an exception message.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field, SecretStr, model_validator

from channels.base import ChannelSettings

__all__ = ["WEBHOOK_PATH", "TelegramConfig", "TelegramMode"]

WEBHOOK_PATH = "/webhooks/telegram"


class TelegramMode(StrEnum):
    POLLING = "polling"  # we call getUpdates; no public URL needed
    WEBHOOK = "webhook"  # Telegram POSTs updates to webhook_url


class TelegramConfig(ChannelSettings):
    token: SecretStr = SecretStr("")
    mode: TelegramMode = TelegramMode.POLLING
    webhook_url: str | None = None
    secret_token: SecretStr | None = None
    api_base: str = "https://api.telegram.org"
    streaming: bool = False
    # An edited message becomes a turn of its own ("[edited] …"); off: edits are ignored.
    edited_messages: bool = False
    max_media_bytes: int = Field(20 * 1024 * 1024, gt=0)
    # the most one attachment's download may take, however slowly the file
    # server sends: the update loop waits for it (docs/channels/telegram.md)
    download_timeout_secs: float = Field(120.0, gt=0)
    poll_timeout_secs: int = Field(30, ge=0, le=60)

    @model_validator(mode="before")
    @classmethod
    def _legacy_group_policy(cls, data: Any) -> Any:
        """`group_policy` ("mention" | "open") came before the shared `groups`
        section; it still sets `groups.require_mention` unless that is given."""
        if not isinstance(data, dict) or "group_policy" not in data:
            return data
        data = dict(data)
        policy = data.pop("group_policy")
        if policy not in ("mention", "open"):
            raise ValueError('group_policy must be "mention" or "open" (better: groups)')
        groups = data.get("groups")
        if groups is None or isinstance(groups, dict):
            groups = dict(groups or {})
            groups.setdefault("require_mention", policy == "mention")
            data["groups"] = groups
        return data

    @model_validator(mode="after")
    def _check_mode(self) -> TelegramConfig:
        if not self.enabled:
            return self
        if not self.token.get_secret_value():
            raise ValueError("token is required when the telegram channel is enabled")
        if self.mode is TelegramMode.WEBHOOK:
            if not self.webhook_url:
                raise ValueError("webhook_url is required in webhook mode")
            if not self.webhook_url.startswith("https://"):
                raise ValueError("webhook_url must be an https:// URL (Telegram requires TLS)")
            secret = self.secret_token.get_secret_value() if self.secret_token else ""
            if not secret:
                raise ValueError("secret_token is required in webhook mode")
            if not all(c.isalnum() or c in "_-" for c in secret) or len(secret) > 256:
                raise ValueError("secret_token may hold only A-Z, a-z, 0-9, _ and - (1-256 chars)")
        return self

    @property
    def api_root(self) -> str:
        return self.api_base.rstrip("/")
