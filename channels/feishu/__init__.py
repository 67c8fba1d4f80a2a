"""The Feishu/Lark channel (webhook and long-connection modes). See docs/channels/feishu.md."""

from channels.feishu.channel import FeishuChannel
from channels.feishu.config import FeishuConfig

__all__ = ["FeishuChannel", "FeishuConfig"]
