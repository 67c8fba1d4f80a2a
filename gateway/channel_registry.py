"""Builds the enabled channels from configuration."""

from __future__ import annotations

from channels.base import Channel
from channels.feishu import FeishuChannel
from channels.telegram import TelegramChannel
from channels.websocket import WebSocketChannel
from channels.wechat import WechatChannel
from channels.wecom_kf import WecomKfChannel
from gateway.chat_policy import show_tool_results
from gateway.config import Config

__all__ = ["build_channels"]


def build_channels(config: Config) -> list[Channel]:
    channels: list[Channel] = []
    section = config.channels
    if section.websocket.enabled:
        token = config.gateway.auth_token
        channels.append(
            WebSocketChannel(
                section.websocket,
                auth_token=token.get_secret_value() if token else None,
                show_tool_results=show_tool_results(config, "websocket"),
            )
        )
    if section.telegram.enabled:
        channels.append(TelegramChannel(section.telegram))
    if section.feishu.enabled:
        channels.append(FeishuChannel(section.feishu))
    if section.wechat.enabled:
        channels.append(WechatChannel(section.wechat))
    if section.wecom_kf.enabled:
        channels.append(WecomKfChannel(section.wecom_kf))
    return channels
