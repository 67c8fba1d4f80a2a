"""`gateway.public_hosts` and `gateway.public_url`: checked at load, and what
the HTTP server then serves (gateway/http.py, channels/served_hosts.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.config.core import Config, ConfigError
from gateway.config.loading import load_config


def _load(tmp_path: Path, gateway: dict[str, object], **sections: object) -> Config:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"gateway": gateway, **sections}))
    return load_config(path, environ={}, cwd=tmp_path).config


def test_the_default_serves_loopback_names_only(tmp_path: Path) -> None:
    served = _load(tmp_path, {}).served_hosts
    assert served.serves("127.0.0.1:19876")
    assert served.serves("localhost")
    assert not served.serves("evil.example:19876")


def test_public_names_and_the_bound_address_are_served(tmp_path: Path) -> None:
    config = _load(
        tmp_path,
        {
            "host": "10.0.0.5",
            "auth_token": "a-long-token",
            "public_hosts": ["Chat.Example.com:8443", "[2001:db8::7]"],
            "public_url": "https://pico.example.org/",
        },
    )
    assert config.gateway.public_hosts == ["chat.example.com:8443", "[2001:db8::7]"]
    served = config.served_hosts
    for host in ("chat.example.com", "[2001:db8::7]:1", "pico.example.org:443", "10.0.0.5:19876"):
        assert served.serves(host), host
    assert not served.serves("example.org")


def test_telegrams_webhook_host_is_served_in_webhook_mode(tmp_path: Path) -> None:
    telegram = {
        "enabled": True,
        "token": "123:abc",
        "mode": "webhook",
        "webhook_url": "https://Bot.Example.com:8443/webhooks/telegram",
        "secret_token": "a-secret-token",
    }
    assert _load(tmp_path, {}, channels={"telegram": telegram}).served_hosts.serves(
        "bot.example.com"
    )
    polling = {**telegram, "mode": "polling"}
    assert not _load(tmp_path, {}, channels={"telegram": polling}).served_hosts.serves(
        "bot.example.com"
    )


@pytest.mark.parametrize(
    ("gateway", "error"),
    [
        ({"public_hosts": ["https://chat.example.com"]}, r"gateway\.public_hosts\.0: .*not a URL"),
        ({"public_hosts": ["chat.example.com/ui"]}, r"gateway\.public_hosts\.0: .*not a URL"),
        ({"public_hosts": ["*.example.com"]}, r"gateway\.public_hosts\.0: .*wildcard"),
        ({"public_hosts": ["x", "x:99999"]}, r"gateway\.public_hosts\.1: .*port"),
        ({"public_url": "chat.example.com"}, r"gateway\.public_url: .*http:// or https://"),
        ({"public_url": "https://u:p@chat.example.com"}, r"gateway\.public_url: .*user name"),
    ],
)
def test_a_bad_entry_names_its_key(tmp_path: Path, gateway: dict[str, object], error: str) -> None:
    with pytest.raises(ConfigError, match=error):
        _load(tmp_path, gateway)


def test_a_public_name_does_not_lift_the_token_rule(tmp_path: Path) -> None:
    """Binding beyond loopback without a token stays refused, public names or not."""
    with pytest.raises(ConfigError, match=r"gateway\.auth_token: required"):
        _load(tmp_path, {"host": "0.0.0.0", "public_hosts": ["chat.example.com"]})
    _load(tmp_path, {"public_hosts": ["chat.example.com"]})  # loopback: no token needed
