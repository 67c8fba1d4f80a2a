"""The WebSocket terminal channel (`/ws`). Protocol: docs/PROTOCOL.md."""

from __future__ import annotations

from pydantic import Field

from channels.base import ChannelSettings


class WebSocketConfig(ChannelSettings):
    enabled: bool = True
    path: str = "/ws"
    max_frame_bytes: int = Field(65_536, ge=1024)
