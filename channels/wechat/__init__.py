"""Personal WeChat over Tencent's iLink bot API (QR login, long polling).

`WechatChannel` loads on first use (channels.lazy). The login flow (and the
QR-code library it needs) is imported from `channels.wechat.login` by the
`picobot channels login` command only; it is not bound here, since a module
named like its function would shadow a lazily bound `login`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from channels.lazy import lazy_exports
from channels.wechat.config import WechatConfig
from channels.wechat.credentials import Credentials

if TYPE_CHECKING:
    from channels.wechat.channel import WechatChannel

__all__ = ["Credentials", "WechatChannel", "WechatConfig"]

__getattr__ = lazy_exports(__name__, {"WechatChannel": "channel"})
