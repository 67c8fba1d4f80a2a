"""Tools both test servers have (imported by the server scripts from their folder)."""

from __future__ import annotations

import os

from mcp.server.fastmcp import FastMCP


def add_common_tools(server: FastMCP) -> None:  # type: ignore[type-arg]
    @server.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool()
    def crash() -> str:
        """Exit the server process in the middle of the call."""
        os._exit(3)
