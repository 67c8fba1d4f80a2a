"""Wiring MCP into the gateway: the manager built from `mcpServers`, its
secrets registered for log redaction, what /ready and /metrics show of it.

The SDK is imported only when at least one server is active, so a gateway
without MCP servers never loads it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from agent.mcp.config import McpServerConfig
from gateway.ops.logging import register_secrets

if TYPE_CHECKING:
    from agent.mcp.manager import McpManager
    from gateway.ops.metrics import Metrics

__all__ = ["build_mcp", "mcp_details", "mcp_metrics", "secret_values"]

# Header values are secrets unless the header is one of these (a token hides
# in Authorization, X-Api-Key, X-DashScope-… alike; masking too much is cheap).
_PLAIN_HEADERS = frozenset({"accept", "accept-language", "content-type", "user-agent"})
_SECRET_ENV = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH", re.IGNORECASE)


def secret_values(servers: Mapping[str, McpServerConfig]) -> list[str]:
    """Strings the log must never show: header values (and the credential
    after an auth scheme such as `Bearer`), credential-looking `env` values."""
    found: list[str] = []
    for server in servers.values():
        for name, value in server.headers.items():
            if name.lower() in _PLAIN_HEADERS or not value:
                continue
            found.append(value)
            scheme, _, credential = value.partition(" ")
            if credential and scheme.isalpha():
                found.append(credential.strip())
        found.extend(v for k, v in server.env.items() if v and _SECRET_ENV.search(k))
    return found


def build_mcp(
    servers: Mapping[str, McpServerConfig],
    *,
    disabled: Iterable[str],
    reserved: Iterable[str],
    metrics: Metrics,
    media_dir: Path | None = None,
) -> McpManager | None:
    """The manager of the active servers; None when there are none. Images in
    tool results are kept under `media_dir` for models that read them."""
    if not any(s.is_active for s in servers.values()):
        return None
    from agent.mcp.manager import McpManager

    register_secrets(secret_values(servers))
    return McpManager(
        servers,
        disabled=disabled,
        reserved=reserved,
        on_call=metrics.mcp_call,
        media_dir=media_dir,
    )


def mcp_details(manager: McpManager | None) -> dict[str, object]:
    """The `mcp` part of the /ready body: each server's state; never decides readiness."""
    if manager is None:
        return {}
    return {"mcp": {s.key: s.to_dict() for s in manager.statuses()}}


def mcp_metrics(manager: McpManager | None, metrics: Metrics) -> None:
    if manager is None:
        return
    from agent.mcp.server import ServerState

    for status in manager.statuses():
        metrics.set_mcp_server(status.key, status.state is ServerState.UP, status.tools)
