"""Configuration of the Feishu/Lark channel (`channels.feishu`).

Every key is documented in docs/channels/feishu.md. Secrets are `SecretStr` so
they never reach a log line or a repr.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from channels.base import ChannelSettings

__all__ = ["FEISHU_DOMAINS", "FeishuConfig", "FeishuMode"]

FEISHU_DOMAINS = {
    "feishu": "https://open.feishu.cn",
    "lark": "https://open.larksuite.com",
}


class FeishuMode(StrEnum):
    WS = "ws"  # long connection: no public URL needed
    WEBHOOK = "webhook"  # Feishu POSTs events to /webhooks/feishu


class FeishuConfig(ChannelSettings):
    # Accepted for compatibility with the reference config, which names the type.
    type: Literal["feishu"] = "feishu"
    app_id: str = ""
    app_secret: SecretStr = SecretStr("")
    encrypt_key: SecretStr | None = None
    verification_token: SecretStr | None = None
    mode: FeishuMode = FeishuMode.WS
    domain: str = "feishu"
    bot_open_id: str | None = None
    media_dir: str | None = None  # default: <media_dir>/feishu of the gateway
    reaction_emoji: str = "Typing"
    reply_context_max_chars: int = Field(2_000, ge=0)
    # Replies as interactive cards with one Markdown element (false: post/text);
    # a body Feishu rejects is sent again as plain text either way.
    card_replies: bool = True
    # Replies to a message go into its thread (Feishu's reply_in_thread).
    reply_in_thread: bool = False
    # Show the reply while it is generated, in one card updated in place.
    streaming: bool = False
    # Text messages are capped at 150 KB: 50k chars stay below it even in CJK.
    max_message_chars: int = Field(20_000, ge=100, le=50_000)
    max_media_bytes: int = Field(30 * 1024 * 1024, gt=0)
    max_webhook_body_bytes: int = Field(1024 * 1024, ge=1024)
    http_timeout_secs: float = Field(30.0, gt=0)
    api_max_retries: int = Field(3, ge=0, le=10)
    # Long connection tuning; None = what the server's ClientConfig says.
    ws_ping_interval_secs: float | None = Field(None, gt=0)
    ws_reconnect_base_secs: float = Field(1.0, gt=0)
    ws_reconnect_max_secs: float = Field(60.0, gt=0)
    ws_connect_timeout_secs: float = Field(10.0, gt=0)

    @field_validator("domain")
    @classmethod
    def _known_domain_or_url(cls, value: str) -> str:
        value = value.strip()
        if value.lower() in FEISHU_DOMAINS:
            return value.lower()
        if value.startswith(("https://", "http://")):
            return value.rstrip("/")
        raise ValueError('must be "feishu", "lark" or an http(s) URL')

    @field_validator("encrypt_key", "verification_token")
    @classmethod
    def _blank_is_none(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or not value.get_secret_value():
            return None
        return value

    @model_validator(mode="after")
    def _credentials_when_enabled(self) -> FeishuConfig:
        if self.enabled and (not self.app_id or not self.app_secret.get_secret_value()):
            raise ValueError("app_id and app_secret are required when the channel is enabled")
        return self

    @property
    def base_url(self) -> str:
        """The Open Platform base URL (no trailing slash)."""
        return FEISHU_DOMAINS.get(self.domain, self.domain)
