"""Personal WeChat over Tencent's iLink bot API (QR login, long polling)."""

from channels.wechat.channel import WechatChannel
from channels.wechat.config import WechatConfig
from channels.wechat.credentials import Credentials
from channels.wechat.login import LoginError, login

__all__ = ["Credentials", "LoginError", "WechatChannel", "WechatConfig", "login"]
