"""The Feishu/Lark channel (webhook and long-connection modes). See docs/channels/feishu.md.

`FeishuChannel` (and lark-oapi with it) loads on first use (channels.lazy).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from channels.feishu.config import FeishuConfig
from channels.lazy import lazy_exports

if TYPE_CHECKING:
    from channels.feishu.channel import FeishuChannel

__all__ = ["FeishuChannel", "FeishuConfig"]

__getattr__ = lazy_exports(__name__, {"FeishuChannel": "channel"})
