from __future__ import annotations

from typing import Any

import pytest

from agent.mcp.config import McpServerConfig, McpTransport
from gateway.config.core import ConfigError
from gateway.config.loading import parse_config


def _server(**keys: Any) -> McpServerConfig:
    return McpServerConfig.model_validate(keys)


def test_the_spec_example_parses_as_written() -> None:
    raw = {
        "mcpServers": {
            "filesystem": {
                "type": "stdio",
                "command": "npx",
                "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/user"],
                "isActive": True,
            },
            "WebSearch": {
                "type": "streamableHttp",
                "baseUrl": "https://dashscope.example/api/v1/mcps/WebSearch/mcp",
                "headers": {"Authorization": "Bearer ${DASHSCOPE_API_KEY}"},
                "isActive": True,
                "name": "AliyunBailianMCP_WebSearch",
            },
        }
    }
    config, _ = parse_config(raw, {"DASHSCOPE_API_KEY": "sk-dash-123456"})
    fs, web = config.mcp_servers["filesystem"], config.mcp_servers["WebSearch"]
    assert fs.transport is McpTransport.STDIO
    assert fs.timeout_secs == 60
    assert web.transport is McpTransport.HTTP
    assert web.headers == {"Authorization": "Bearer sk-dash-123456"}
    assert web.name == "AliyunBailianMCP_WebSearch"


def test_url_is_another_spelling_of_base_url_and_http_a_type() -> None:
    server = _server(type="http", url="http://127.0.0.1:9/mcp")
    assert server.base_url == "http://127.0.0.1:9/mcp"
    assert server.is_active
    with pytest.raises(ValueError, match="baseUrl or url, not both"):
        _server(type="http", url="http://a/mcp", baseUrl="http://b/mcp")


@pytest.mark.parametrize(
    ("keys", "problem"),
    [
        ({"type": "stdio"}, "command is required"),
        ({"type": "streamableHttp"}, "baseUrl is required"),
        ({"type": "http", "baseUrl": "ftp://x/mcp"}, "must be an http"),
        ({"type": "stdio", "command": "x", "headers": {"a": "b"}}, "headers: not used by a stdio"),
        ({"type": "http", "baseUrl": "http://x/mcp", "command": "x"}, "command: not used"),
        ({"type": "sse", "baseUrl": "http://x/mcp"}, "type"),
        ({"type": "stdio", "command": "x", "bogus": 1}, "bogus"),
    ],
)
def test_bad_servers_fail_with_the_reason(keys: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        parse_config({"mcpServers": {"s": keys}}, {})


def test_an_unset_header_variable_stops_start_up_naming_the_path() -> None:
    raw = {
        "mcpServers": {
            "search": {
                "type": "http",
                "baseUrl": "http://127.0.0.1:9/mcp",
                "headers": {"Authorization": "Bearer ${TOKEN}"},
            }
        }
    }
    with pytest.raises(ConfigError) as caught:
        parse_config(raw, {})
    assert "mcpServers.search.headers.Authorization: environment variable TOKEN is not set" in str(
        caught.value
    )
    # set, or the server inactive, or a default given: fine
    parse_config(raw, {"TOKEN": "t0ken-value"})
    raw["mcpServers"]["search"]["isActive"] = False
    parse_config(raw, {})


def test_an_unset_env_variable_of_a_stdio_server_stops_start_up() -> None:
    raw = {"mcpServers": {"fs": {"type": "stdio", "command": "x", "env": {"KEY": "${FS_KEY}"}}}}
    with pytest.raises(ConfigError, match=r"mcpServers\.fs\.env\.KEY: environment variable FS_KEY"):
        parse_config(raw, {})


def test_tool_filters_use_the_servers_own_names() -> None:
    server = _server(type="stdio", command="x", enabled_tools=["a", "b"], disabled_tools=["b"])
    assert [t for t in ("a", "b", "c") if server.wants(t)] == ["a"]
    assert _server(type="stdio", command="x", enabled_tools=["*"]).wants("c")
