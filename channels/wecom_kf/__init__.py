"""The WeCom customer-service (WeChat KF) channel. See docs/channels/wecom_kf.md.

`WecomKfChannel` loads on first use (channels.lazy).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from channels.lazy import lazy_exports
from channels.wecom_kf.config import WecomKfConfig

if TYPE_CHECKING:
    from channels.wecom_kf.channel import WecomKfChannel

__all__ = ["WecomKfChannel", "WecomKfConfig"]

__getattr__ = lazy_exports(__name__, {"WecomKfChannel": "channel"})
