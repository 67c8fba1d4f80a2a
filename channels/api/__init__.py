"""The OpenAI-compatible API channel (docs/api.md): `POST /v1/chat/completions`,
`GET /v1/models` and `GET /v1/picobot/replies/{key}` on the gateway's HTTP
server, each request an inbound message through the durable inbox."""

from __future__ import annotations

from typing import TYPE_CHECKING

from channels.api.config import ApiConfig
from channels.lazy import lazy_exports

if TYPE_CHECKING:
    from channels.api.channel import ApiChannel

__all__ = ["ApiChannel", "ApiConfig"]

__getattr__ = lazy_exports(__name__, {"ApiChannel": "channel"})
