"""`channels.api`: the OpenAI-compatible API channel's settings (docs/api.md)."""

from __future__ import annotations

from pydantic import Field, SecretStr

from channels.base import ChannelSettings

__all__ = ["ApiConfig"]


class ApiConfig(ChannelSettings):
    enabled: bool = False
    # name → key: a request bearing it is the principal token:<name>
    keys: dict[str, SecretStr] = Field(default_factory=dict)
    # how long a request without streaming waits for its answer; then 504, and
    # the answer stays fetchable by its Idempotency-Key
    reply_timeout_secs: float = Field(300.0, gt=0)
    max_request_bytes: int = Field(1_000_000, ge=1024)
    # the MCP server at /mcp (docs/mcp-server.md), with the same keys
    mcp: bool = True
