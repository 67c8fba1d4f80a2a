"""Configuration of the WeCom customer-service channel (`channels.wecom_kf`).

Every key is documented in docs/channels/wecom_kf.md. Secrets are `SecretStr` so
they never reach a log line or a repr.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from channels.base import ChannelSettings

__all__ = ["DEFAULT_API_BASE", "WecomKfConfig"]

DEFAULT_API_BASE = "https://qyapi.weixin.qq.com"


class WecomKfConfig(ChannelSettings):
    type: Literal["wecom_kf"] = "wecom_kf"
    corp_id: str = ""
    secret: SecretStr = SecretStr("")  # the customer-service app's Secret (微信客服 Secret)
    token: SecretStr = SecretStr("")  # the callback Token
    encoding_aes_key: SecretStr = SecretStr("")  # the callback EncodingAESKey (43 chars)
    open_kfids: list[str] = Field(default_factory=list)  # [] = every account of the corp
    path: str = "/webhooks/wecom_kf"
    api_base: str = DEFAULT_API_BASE
    media_dir: str | None = None  # default: <media_dir>/wecom_kf of the gateway
    # send_msg takes at most 2048 bytes of text (UTF-8).
    max_message_bytes: int = Field(2048, ge=16, le=2048)
    max_media_bytes: int = Field(20 * 1024 * 1024, gt=0)
    max_callback_body_bytes: int = Field(64 * 1024, ge=1024)
    sync_limit: int = Field(1000, ge=1, le=1000)
    http_timeout_secs: float = Field(15.0, gt=0)
    # At an account's first pull (no stored cursor) messages sent more than this
    # long before the channel started are skipped, not answered: WeCom's stream
    # starts with the last 3 days, which staff may have handled (0 = none).
    backlog_secs: float = Field(0.0, ge=0, le=3 * 86400)
    # A failed sync_msg is retried after this long (the callback also triggers one).
    sync_retry_secs: float = Field(5.0, gt=0)
    # errcode 45009/45033 (API frequency limits): wait at least this long.
    rate_limit_retry_secs: float = Field(30.0, gt=0)

    @field_validator("path")
    @classmethod
    def _absolute_path(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError("must start with /")
        return value

    @field_validator("api_base")
    @classmethod
    def _http_url(cls, value: str) -> str:
        value = value.strip().rstrip("/")
        if not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value

    @model_validator(mode="after")
    def _credentials_when_enabled(self) -> WecomKfConfig:
        if not self.enabled:
            return self
        missing = [
            name
            for name, value in (
                ("corp_id", self.corp_id),
                ("secret", self.secret.get_secret_value()),
                ("token", self.token.get_secret_value()),
                ("encoding_aes_key", self.encoding_aes_key.get_secret_value()),
            )
            if not value
        ]
        if missing:
            raise ValueError(f"{', '.join(missing)} required when the channel is enabled")
        if len(self.encoding_aes_key.get_secret_value()) != 43:
            raise ValueError("encoding_aes_key must be the 43 characters WeCom shows")
        return self
