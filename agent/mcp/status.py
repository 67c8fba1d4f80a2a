"""The context part that tells the model, in one system line of each turn,
which MCP servers are not up — so it is never left to wonder where a tool went.

Light on purpose (no SDK import): it reads the manager through `Servers`.
"""

from __future__ import annotations

from typing import Protocol

from agent.context import TurnFacts
from agent.messages import Marker

__all__ = ["McpStatusPart", "Servers"]


class Servers(Protocol):
    def unavailable(self) -> list[str]:
        """Keys of the configured servers that are not up."""
        ...


def status_line(down: list[str]) -> str | None:
    if not down:
        return None
    if len(down) == 1:
        return f"MCP server `{down[0]}` is unavailable; its tools are not offered."
    names = ", ".join(f"`{k}`" for k in down)
    return f"MCP servers {names} are unavailable; their tools are not offered."


class McpStatusPart:
    def __init__(self, servers: Servers) -> None:
        self.name = "mcp_status"
        self.marker: Marker | None = None  # rendered per turn, never persisted
        self._servers = servers

    async def render(self, turn: TurnFacts) -> str | None:
        return status_line(self._servers.unavailable())
