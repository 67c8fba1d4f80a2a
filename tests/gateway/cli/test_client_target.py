"""Which gateway `picobot agent` talks to (issue 59): `--gateway-url` (a base
URL gets the WebSocket path), else the gateway's own config, read leniently,
else the default; the config's token only for the config's URL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gateway.cli.client.target import DEFAULT_URL, gateway_url, resolve_target
from gateway.config.core import ConfigError
from gateway.config.loading import load_config


def _write(path: Path, config: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config))
    return path


def _resolve(
    tmp_path: Path,
    *,
    url: str | None = None,
    token: str | None = None,
    config: str | None = None,
    **environ: str,
) -> tuple[str, str | None]:
    env = {"PICOBOT_HOME": str(tmp_path / "home"), **environ}
    target = resolve_target(url=url, token=token, config=config, environ=env, cwd=tmp_path)
    return target.url, target.token


@pytest.mark.parametrize(
    ("given", "url"),
    [
        ("http://127.0.0.1:8080", "ws://127.0.0.1:8080/ws"),
        ("http://127.0.0.1:8080/", "ws://127.0.0.1:8080/ws"),  # the web UI's address
        ("https://chat.example.com", "wss://chat.example.com/ws"),
        ("ws://127.0.0.1:19876/ws", "ws://127.0.0.1:19876/ws"),
        ("wss://chat.example.com/picobot/ws", "wss://chat.example.com/picobot/ws"),
        ("127.0.0.1:18001", "ws://127.0.0.1:18001/ws"),
        ("ws://[::1]:18001", "ws://[::1]:18001/ws"),
    ],
)
def test_a_base_url_gets_the_websocket_path(given: str, url: str) -> None:
    assert gateway_url(given) == url


@pytest.mark.parametrize("given", ["ftp://host/ws", "ws://host:port/ws", "http://"])
def test_a_url_that_cannot_be_a_gateway_is_a_config_error(given: str) -> None:
    with pytest.raises(ConfigError, match="--gateway-url"):
        gateway_url(given)


def test_without_a_config_file_the_default(tmp_path: Path) -> None:
    assert _resolve(tmp_path) == (DEFAULT_URL, None)
    assert _resolve(tmp_path, PICOBOT_TOKEN="t1") == (DEFAULT_URL, "t1")


def test_the_config_in_picobot_home_names_host_port_path_and_token(tmp_path: Path) -> None:
    _write(
        tmp_path / "home" / "config.json",
        {
            "gateway": {"host": "0.0.0.0", "port": 18001, "auth_token": "from-config"},
            "channels": {"websocket": {"path": "/chat/ws"}},
        },
    )
    assert _resolve(tmp_path) == ("ws://127.0.0.1:18001/chat/ws", "from-config")
    # explicit beats the config: PICOBOT_TOKEN, then --token
    assert _resolve(tmp_path, PICOBOT_TOKEN="env")[1] == "env"
    assert _resolve(tmp_path, token="flag", PICOBOT_TOKEN="env")[1] == "flag"


def test_an_explicit_url_never_gets_the_configs_token(tmp_path: Path) -> None:
    """The operator's token goes only to the URL its own config names."""
    _write(tmp_path / "home" / "config.json", {"gateway": {"port": 18001, "auth_token": "secret"}})
    assert _resolve(tmp_path, url="wss://elsewhere.example") == ("wss://elsewhere.example/ws", None)
    assert _resolve(tmp_path, url="ws://127.0.0.1:1/ws", PICOBOT_TOKEN="mine")[1] == "mine"


def test_dot_config_json_and_an_explicit_config(tmp_path: Path) -> None:
    _write(tmp_path / "config.json", {"gateway": {"port": 18002}})  # ./config.json
    assert _resolve(tmp_path)[0] == "ws://127.0.0.1:18002/ws"
    other = _write(tmp_path / "other.json", {"gateway": {"host": "::", "port": 18003}})
    assert _resolve(tmp_path, config=str(other))[0] == "ws://127.0.0.1:18003/ws"
    v6 = _write(tmp_path / "v6.json", {"gateway": {"host": "::1", "port": 18004}})
    assert _resolve(tmp_path, config=str(v6))[0] == "ws://[::1]:18004/ws"
    with pytest.raises(ConfigError, match="does not exist"):
        _resolve(tmp_path, config=str(tmp_path / "missing.json"))


def test_a_config_the_gateway_cannot_load_still_names_its_gateway(tmp_path: Path) -> None:
    """Lenient: a channel's unset ${ENV}, an MCP server's, an unknown key
    elsewhere do not matter to the client; the token's own placeholder is read."""
    path = _write(
        tmp_path / "home" / "config.json",
        {
            "gateway": {"port": 18005, "auth_token": "${GW_TOKEN}"},
            "channels": {"telegram": {"enabled": True, "token": "${TELEGRAM_TOKEN}"}},
            "mcpServers": {"files": {"command": "x", "env": {"KEY": "${MCP_KEY}"}}},
            "not_a_section": 1,
        },
    )
    with pytest.raises(ConfigError):
        load_config(path, {})
    assert _resolve(tmp_path, GW_TOKEN="tok") == ("ws://127.0.0.1:18005/ws", "tok")
    target = resolve_target(
        url=None, token=None, config=None, environ={"PICOBOT_HOME": str(path.parent)}, cwd=tmp_path
    )
    assert target.token is None
    assert target.token_hint is not None
    assert "${GW_TOKEN}" in target.token_hint


def test_an_unreadable_gateway_section_is_a_config_error(tmp_path: Path) -> None:
    home = tmp_path / "home" / "config.json"
    for bad, says in (
        ({"gateway": {"port": "many"}}, "gateway.port"),
        ({"gateway": {"port": 0}}, "gateway.port is 0"),
        ({"gateway": {"port": 1}, "channels": {"websocket": {"enabled": False}}}, "disabled|false"),
    ):
        _write(home, bad)
        with pytest.raises(ConfigError, match=says):
            _resolve(tmp_path)
    home.write_text("{not json")
    with pytest.raises(ConfigError, match="cannot read"):
        _resolve(tmp_path)


def test_the_token_is_not_in_the_targets_repr(tmp_path: Path) -> None:
    target = resolve_target(
        url="ws://h:1/ws", token="hunter2", config=None, environ={}, cwd=tmp_path
    )
    assert "hunter2" not in repr(target)
