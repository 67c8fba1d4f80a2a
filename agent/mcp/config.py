"""Configuration of MCP servers: the top-level `mcpServers` section, Claude Desktop format.

Keys are spelled as the spec (and Claude Desktop / Cursor) spell them —
`type`, `isActive`, `name`, `command`, `args`, `env`, `cwd`, `baseUrl` (alias
`url`), `headers` — plus picobot's own `timeout_secs`, `ping_interval_secs`,
`enabled_tools` and `disabled_tools`. A server's map key, not its `name`,
goes into tool names (`mcp_{key}_{tool}`).

`${VAR}` placeholders are replaced by the config loader before validation; an
unset variable in a server's `headers` or `env` must stop start-up
(`unset_placeholders`) instead of sending `Authorization: Bearer ` with nothing
after it.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator

__all__ = ["McpServerConfig", "McpTransport", "unset_placeholders"]

SECTION = "mcpServers"


class McpTransport(StrEnum):
    STDIO = "stdio"
    HTTP = "http"  # streamable HTTP


_STDIO_ONLY = ("command", "args", "env", "cwd")
_HTTP_ONLY = ("base_url", "headers")


class McpServerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["stdio", "streamableHttp", "http"]
    is_active: bool = Field(True, alias="isActive")
    name: str | None = None  # display name; the map key when unset
    # stdio
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    # streamable HTTP
    base_url: str | None = Field(
        None, alias="baseUrl", validation_alias=AliasChoices("baseUrl", "url")
    )
    headers: dict[str, str] = Field(default_factory=dict)
    # Bound of connecting, listing tools and of one tool call.
    timeout_secs: float = Field(60.0, gt=0)
    # How often an idle connection is pinged, so a server that hangs is noticed.
    ping_interval_secs: float = Field(30.0, gt=0)
    enabled_tools: list[str] | None = None  # the server's own tool names; None: all
    disabled_tools: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _one_url(cls, data: Any) -> Any:
        if isinstance(data, dict) and "baseUrl" in data and "url" in data:
            raise ValueError("give baseUrl or url, not both")
        return data

    @model_validator(mode="after")
    def _transport_keys(self) -> McpServerConfig:
        set_keys = self.model_fields_set
        if self.transport is McpTransport.STDIO:
            if not self.command:
                raise ValueError("command is required for a stdio server")
            wrong = [k for k in _HTTP_ONLY if k in set_keys]
        else:
            if not self.base_url:
                raise ValueError(f"baseUrl is required for a {self.type} server")
            parts = urlsplit(self.base_url)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise ValueError(f"baseUrl must be an http(s) URL, not {self.base_url!r}")
            wrong = [k for k in _STDIO_ONLY if k in set_keys]
        if wrong:
            shown = ", ".join("baseUrl" if k == "base_url" else k for k in wrong)
            raise ValueError(f"{shown}: not used by a {self.type} server")
        return self

    @property
    def transport(self) -> McpTransport:
        return McpTransport.STDIO if self.type == "stdio" else McpTransport.HTTP

    def wants(self, tool: str) -> bool:
        """Whether the server's tool `tool` (its own name) is offered at all."""
        enabled = self.enabled_tools
        if enabled is not None and "*" not in enabled and tool not in enabled:
            return False
        return tool not in self.disabled_tools


def unset_placeholders(
    servers: Mapping[str, McpServerConfig], missing_env: Mapping[str, str]
) -> list[str]:
    """Problems for active servers whose `headers` or `env` named an unset variable.

    `missing_env` maps a JSON path to the variable its placeholder named (the
    config loader records them, e.g. `mcpServers.search.headers.Authorization`).
    """
    problems: list[str] = []
    for path, variable in sorted(missing_env.items()):
        for key, server in servers.items():
            rest = path.removeprefix(f"{SECTION}.{key}.")
            if rest != path and rest.startswith(("headers.", "env.")) and server.is_active:
                problems.append(f"{path}: environment variable {variable} is not set")
    return problems
