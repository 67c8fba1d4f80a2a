"""Personal WeChat over Tencent's iLink bot API (QR login, long polling).

`WechatChannel` loads on first use (channels.lazy). The login flow is
imported here: its module is named like its function, and an import of the
module after this one's would otherwise shadow a lazily bound `login`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from channels.lazy import lazy_exports
from channels.wechat.config import WechatConfig
from channels.wechat.credentials import Credentials
from channels.wechat.login import LoginError, login

if TYPE_CHECKING:
    from channels.wechat.channel import WechatChannel

__all__ = ["Credentials", "LoginError", "WechatChannel", "WechatConfig", "login"]

__getattr__ = lazy_exports(__name__, {"WechatChannel": "channel"})
