"""Configuration of the wechat channel (`channels.wechat`), Tencent's iLink bot API.

Only settings live here; credentials (bot token) are obtained by QR login and
kept in the credentials file, never in the config.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from channels.base import ChannelSettings

DEFAULT_BASE_URL = "https://ilinkai.weixin.qq.com"
DEFAULT_CDN_BASE_URL = "https://novac2c.cdn.weixin.qq.com/c2c"


class WechatConfig(ChannelSettings):
    """`channels.wechat`: the keys of the spec's example plus operational knobs."""

    type: Literal["wechat"] = "wechat"
    base_url: str = DEFAULT_BASE_URL
    cdn_base_url: str = DEFAULT_CDN_BASE_URL
    # None: <PICOBOT_HOME>/wechat/credentials.json
    cred_path: str | None = None
    # `picobot channels login wechat` replaces saved credentials even if they look valid.
    force_login: bool = False
    # None: <PICOBOT_HOME>/media/wechat
    media_dir: str | None = None
    max_message_chars: int = Field(2000, ge=1, le=4000)
    max_media_bytes: int = Field(20_000_000, gt=0)
    typing: bool = True
    typing_interval_secs: float = Field(5.0, gt=0)
    # Long poll: how long the server may hold getupdates before an empty answer.
    poll_timeout_secs: float = Field(35.0, gt=0)
    retry_delay_secs: float = Field(2.0, gt=0)
    backoff_secs: float = Field(30.0, gt=0)
    # After ret -14 (session expired): retry the same token after this long.
    session_pause_secs: float = Field(3600.0, gt=0)
    # While paused or not logged in: how often to look for new credentials on disk.
    credential_check_secs: float = Field(30.0, gt=0)
    # HTTP 429 from iLink: wait at least this long before retrying.
    rate_limit_retry_secs: float = Field(30.0, gt=0)
    # A context_token older than this (iLink expires them after ~90-160 s) is
    # exchanged for a fresh one through getconfig before the next send.
    context_refresh_secs: float = Field(60.0, gt=0)
    # Sends one context_token may carry before it is refreshed (iLink limits them).
    context_max_sends: int = Field(10, ge=1)
    # How long a typing ticket from getconfig is used before fetching a new one.
    typing_ticket_ttl_secs: float = Field(300.0, gt=0)
    request_timeout_secs: float = Field(15.0, gt=0)
    # QR login
    login_timeout_secs: float = Field(480.0, gt=0)
    qr_poll_interval_secs: float = Field(1.0, ge=0)
    qr_status_timeout_secs: float = Field(35.0, gt=0)
    qr_max_refreshes: int = Field(3, ge=0)

    @field_validator("base_url", "cdn_base_url")
    @classmethod
    def _strip_slash(cls, value: str) -> str:
        value = value.strip().rstrip("/")
        if not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value
