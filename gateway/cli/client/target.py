"""Which gateway the terminal client talks to, and with which token.

In order: `--gateway-url` (a base URL gets the WebSocket path appended),
else the config the gateway itself uses (`--config`, else
$PICOBOT_HOME/config.json, else ./config.json: gateway.host, gateway.port,
channels.websocket.path), else ws://127.0.0.1:19876/ws. The token: `--token`,
else PICOBOT_TOKEN, else the config's gateway.auth_token — that one only
when the URL came from the same config, so the operator's token is never
sent to a URL someone typed.

The config is read leniently: only the keys named above, so a section the
client does not need (a channel's unset ${ENV}, an MCP server, an unknown
key) cannot stop it. An unreadable gateway section is a `ConfigError`.
The token is never printed (`Target`'s repr leaves it out).
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from gateway.config.core import ConfigError
from gateway.config.loading import find_config_file, parse_config

__all__ = [
    "DEFAULT_URL",
    "Target",
    "connect_host",
    "gateway_url",
    "resolve_target",
]

DEFAULT_URL = "ws://127.0.0.1:19876/ws"
WS_PATH = "/ws"  # channels.websocket.path's default
_SCHEMES = {"ws": "ws", "wss": "wss", "http": "ws", "https": "wss"}
_ANY_ADDRESS = {"", "0.0.0.0", "::", "[::]"}


@dataclass(frozen=True, slots=True)
class Target:
    url: str
    token: str | None = field(default=None, repr=False)
    # where the URL came from, for error messages: "--gateway-url", the config, "default"
    source: str = "default"
    # a note for a refused token, e.g. the config's ${PICOBOT_TOKEN} unset here
    token_hint: str | None = None


def gateway_url(raw: str, path: str = WS_PATH) -> str:
    """`raw` as a WebSocket URL: http(s):// becomes ws(s)://, a bare
    `host:port` gets ws://, and `path` is used when the URL has none (or `/`).
    `ConfigError` when it cannot be one."""
    text = raw.strip()
    if "://" not in text:
        text = f"ws://{text}"
    parts = urlsplit(text)
    scheme = _SCHEMES.get(parts.scheme.lower())
    if scheme is None or not parts.hostname:
        raise ConfigError(f"--gateway-url {raw!r}: not a ws://, wss://, http:// or https:// URL")
    try:
        parts.port  # noqa: B018 (raises on a port that is not a number)
    except ValueError:
        raise ConfigError(f"--gateway-url {raw!r}: the port is not a number") from None
    # "/" too: the web UI's address (http://host:port/) names no WebSocket path
    chosen = parts.path if parts.path not in ("", "/") else path
    return urlunsplit((scheme, parts.netloc, chosen, parts.query, ""))


def connect_host(host: str) -> str:
    """Where to reach a gateway listening on `host`, as a URL's host part."""
    if host.strip() in _ANY_ADDRESS:
        return "127.0.0.1"
    try:
        if ipaddress.ip_address(host).version == 6:
            return f"[{host}]"
    except ValueError:
        pass  # a name
    return host


def _section(raw: Any, key: str) -> Any:
    return raw.get(key, {}) if isinstance(raw, dict) else {}


def _from_config(path: Path, environ: Mapping[str, str]) -> tuple[str, str | None, str | None]:
    """The URL, the token and a hint about the token, from the config at `path`."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    gateway, websocket = _section(raw, "gateway"), _section(_section(raw, "channels"), "websocket")

    def pick(section: Any, *keys: str) -> Any:
        if not isinstance(section, dict):
            return section  # validation says what is wrong with it
        return {k: section[k] for k in keys if k in section}

    ws = pick(websocket, "path")
    if isinstance(ws, dict):
        # validated as disabled: the gateway's own check that a non-loopback
        # host has a token is for the gateway; the client reports a refused token
        ws["enabled"] = False
    subset = {"gateway": pick(gateway, "host", "port", "auth_token"), "channels": {"websocket": ws}}
    config, missing = parse_config(subset, environ, source=f"{path} (gateway section)")
    if isinstance(websocket, dict) and websocket.get("enabled") is False:
        raise ConfigError(
            f"{path}: channels.websocket.enabled is false: the terminal client talks to "
            "that channel (enable it, or pass --gateway-url)"
        )
    cfg = config.gateway
    if cfg.port == 0:
        raise ConfigError(
            f"{path}: gateway.port is 0 (any free port): pass --gateway-url with the port it got"
        )
    url = f"ws://{connect_host(cfg.host)}:{cfg.port}{config.channels.websocket.path}"
    token = cfg.auth_token.get_secret_value() if cfg.auth_token is not None else None
    variable = missing.get("gateway.auth_token")
    hint = f"gateway.auth_token in {path} reads ${{{variable}}}, unset here" if variable else None
    return url, token or None, hint


def resolve_target(
    *,
    url: str | None,
    token: str | None,
    config: str | None,
    environ: Mapping[str, str],
    cwd: Path,
) -> Target:
    """The gateway to talk to (see the module docstring for the order)."""
    token = token or environ.get("PICOBOT_TOKEN") or None
    if url is not None:
        return Target(gateway_url(url), token, "--gateway-url")
    path = find_config_file(config, environ, cwd)
    if path is None:
        return Target(DEFAULT_URL, token, "default")
    found, config_token, hint = _from_config(path, environ)
    return Target(found, token or config_token, str(path), None if token else hint)
