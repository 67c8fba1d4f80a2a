"""The WeCom customer-service (WeChat KF) channel. See docs/channels/wecom_kf.md."""

from channels.wecom_kf.channel import WecomKfChannel
from channels.wecom_kf.config import WecomKfConfig

__all__ = ["WecomKfChannel", "WecomKfConfig"]
