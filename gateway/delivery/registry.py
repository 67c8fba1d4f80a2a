"""Builds the enabled channels from configuration.

A channel's module (and its SDK) is imported only when that channel is
enabled: a WebSocket-only gateway never loads python-telegram-bot or lark-oapi.
"""

from __future__ import annotations

from channels.base import Channel
from channels.websocket import WebSocketChannel
from gateway.config.core import Config
from gateway.turns.chat_policy import show_tool_results

__all__ = ["build_channels"]


def build_channels(config: Config) -> list[Channel]:
    channels: list[Channel] = []
    section = config.channels
    token = config.gateway.auth_token
    auth_token = token.get_secret_value() if token else None
    if section.websocket.enabled:
        channels.append(
            WebSocketChannel(
                section.websocket,
                auth_token=auth_token,
                show_tool_results=show_tool_results(config, "websocket"),
            )
        )
    if section.api.enabled:
        from channels.api.channel import ApiChannel

        channels.append(
            ApiChannel(
                section.api,
                auth_token=auth_token,
                agents=list(config.agents),
            )
        )
    if section.telegram.enabled:
        from channels.telegram.channel import TelegramChannel

        channels.append(TelegramChannel(section.telegram))
    if section.feishu.enabled:
        from channels.feishu.channel import FeishuChannel

        channels.append(FeishuChannel(section.feishu))
    if section.wechat.enabled:
        from channels.wechat.channel import WechatChannel

        channels.append(WechatChannel(section.wechat))
    if section.wecom_kf.enabled:
        from channels.wecom_kf.channel import WecomKfChannel

        channels.append(WecomKfChannel(section.wecom_kf))
    return channels
