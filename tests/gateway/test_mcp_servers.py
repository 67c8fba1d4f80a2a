"""Wiring MCP into the gateway: which config values are secrets, the manager only
when a server is active, the /ready part."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agent.mcp.config import McpServerConfig
from gateway.ops.logging import MASK, clear_secrets, redact_text
from gateway.ops.metrics import Metrics
from gateway.tools.mcp import build_mcp, mcp_details, secret_values


@pytest.fixture(autouse=True)
def _forget_secrets() -> Iterator[None]:
    yield
    clear_secrets()


def _servers(**entries: dict[str, object]) -> dict[str, McpServerConfig]:
    return {k: McpServerConfig.model_validate(v) for k, v in entries.items()}


def test_header_values_and_credential_env_are_secrets() -> None:
    servers = _servers(
        web={
            "type": "http",
            "baseUrl": "http://127.0.0.1:9/mcp",
            "headers": {
                "Authorization": "Bearer tok-123456789",
                "X-Api-Key": "key-abcdefgh",
                "Accept": "application/json",
            },
        },
        fs={"type": "stdio", "command": "x", "env": {"FS_TOKEN": "fs-secret-1", "LANG": "C.UTF-8"}},
    )
    assert sorted(secret_values(servers)) == [
        "Bearer tok-123456789",
        "fs-secret-1",
        "key-abcdefgh",
        "tok-123456789",
    ]


def test_no_active_server_no_manager_and_nothing_in_ready() -> None:
    servers = _servers(off={"type": "stdio", "command": "x", "isActive": False})
    assert build_mcp(servers, disabled=[], reserved=[], metrics=Metrics()) is None
    assert mcp_details(None) == {}


def test_building_the_manager_registers_the_header_secrets() -> None:
    servers = _servers(
        web={
            "type": "http",
            "baseUrl": "http://127.0.0.1:9/mcp",
            "headers": {"Authorization": "Token zq8-secret-value"},
        }
    )
    manager = build_mcp(servers, disabled=[], reserved=[], metrics=Metrics())
    assert manager is not None
    assert redact_text("sent zq8-secret-value to the server") == f"sent {MASK} to the server"
    assert mcp_details(manager) == {
        "mcp": {"web": {"name": "web", "transport": "http", "state": "connecting", "tools": 0}}
    }
