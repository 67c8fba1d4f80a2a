"""The host names the gateway answers to, and the browser origins that may use it.

A page on another site cannot read the gateway's answers, but a page whose
name resolves to 127.0.0.1 (DNS rebinding) is same-origin with it: its
requests carry `Host: evil.example:PORT` and `Origin: http://evil.example:PORT`.
So the HTTP server serves only the names in `ServedHosts` (loopback by
default, plus what the operator lists) and refuses every other `Host`
(gateway/http.py), and a browser origin is judged against the same names,
never against the request's own `Host` alone.

Only the host name decides whether a `Host` is served, not its port: a
reverse proxy may rewrite the port, and a rebinding page cannot change the
name. This module must never accept an origin only because it matches the
`Host` the request carries.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from aiohttp import web

__all__ = ["SERVED_HOSTS", "ServedHosts", "host_name", "split_host"]

# an ASCII DNS name or IPv4 address (IDNs in their punycode form), no wildcards
_NAME: Final = re.compile(r"[a-z0-9_-]+(?:\.[a-z0-9_-]+)*\.?")
_PORT: Final = re.compile(r"[0-9]{1,5}")
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}
_WILDCARDS: Final = frozenset({"0.0.0.0", "::", "[::]"})  # every interface: no one name


def split_host(value: str) -> tuple[str, int | None]:
    """A `Host` value or config entry ("name", "name:port", "[v6]",
    "[v6]:port", or a bare IPv6 address) as (lowercased name, port).
    A trailing dot is dropped ("localhost." is "localhost"); IPv6 without
    brackets. Raises ValueError saying what is wrong."""
    text = value.strip().lower()
    rest = ""
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise ValueError("an IPv6 address in brackets is missing its ']'")
        name, rest = text[1:end], text[end + 1 :]
        _check_ipv6(name)
    elif text.count(":") > 1:
        name = text
        _check_ipv6(name)
    else:
        name, sep, port = text.partition(":")
        rest = sep + port
        if not _NAME.fullmatch(name):
            raise ValueError(
                "not a host name: letters, digits, '-', '_' and '.' only "
                "(no scheme, path, '@' or wildcard; IDNs in punycode)"
            )
        name = name.rstrip(".")
    if not rest:
        return name, None
    port = rest[1:]
    if not rest.startswith(":") or not _PORT.fullmatch(port) or not 0 < int(port) <= 65535:
        raise ValueError("the port must be 1-65535")
    return name, int(port)


def _check_ipv6(name: str) -> None:
    try:
        ipaddress.IPv6Address(name)
    except ValueError:
        raise ValueError(f"{name!r} is not an IPv6 address") from None


def host_name(value: str | None) -> str | None:
    """The host name of a `Host` value; None when it is missing or malformed."""
    if value is None:
        return None
    try:
        return split_host(value)[0]
    except ValueError:
        return None


def _is_loopback(name: str) -> bool:
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback  # 127.0.0.0/8 and ::1
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class ServedHosts:
    """The names this gateway serves: every loopback name, `local` (the
    address it is bound to) and `public` (the operator's public names).

    A browser origin may use the gateway when its host is a public name
    (any port: the operator vouches for that name), or a loopback or local
    name on the port the request was sent to (same origin: a page another
    program serves on localhost:3000 is not the gateway's page)."""

    public: frozenset[str] = frozenset()
    local: frozenset[str] = frozenset()

    @classmethod
    def of(cls, public: Iterable[str] = (), bound: str | None = None) -> ServedHosts:
        """From host entries ("name" or "name:port": the port is ignored) and
        the address the server binds (a wildcard such as 0.0.0.0 names no host)."""
        name = None if bound in _WILDCARDS else host_name(bound)  # malformed: cannot be bound
        local = frozenset({name}) if name else frozenset()
        return cls(frozenset(split_host(entry)[0] for entry in public), local)

    @staticmethod
    def check_entry(entry: str) -> str:
        """A config entry naming a served host, lowercased; ValueError if it
        is not "name" or "name:port" (no scheme, path or wildcard)."""
        if "://" in entry or "/" in entry:
            raise ValueError(f"{entry!r}: a host name, not a URL (no scheme or path)")
        try:
            split_host(entry)
        except ValueError as exc:
            raise ValueError(f"{entry!r}: {exc}") from None
        return entry.strip().lower()

    @staticmethod
    def check_url(url: str) -> str:
        """An http(s) URL whose host is served; ValueError if it is not one."""
        parts = urlsplit(url.strip())
        if parts.scheme not in _DEFAULT_PORTS or not parts.netloc:
            raise ValueError(f"{url!r}: an http:// or https:// URL with a host name")
        if "@" in parts.netloc or parts.query or parts.fragment:
            raise ValueError(f"{url!r}: no user name, query or fragment")
        try:
            split_host(parts.netloc)
        except ValueError as exc:
            raise ValueError(f"{url!r}: {exc}") from None
        return url.strip()

    def serves(self, host: str | None) -> bool:
        """Whether `host` (a `Host` header value, port or not) is served."""
        name = host_name(host)
        return name is not None and (
            name in self.public or name in self.local or _is_loopback(name)
        )

    def origin_allowed(self, origin: str, host: str | None) -> bool:
        """Whether a page of `origin` may use the gateway, for a request sent
        to `host` (its `Host` header). "null" never may."""
        if not self.serves(host):
            return False
        try:
            parts = urlsplit(origin)
            name, port = split_host(parts.netloc)
        except ValueError:
            return False
        if parts.scheme not in _DEFAULT_PORTS or parts.path or parts.query or "@" in origin:
            return False
        if name in self.public:
            return True
        if not (name in self.local or _is_loopback(name)):
            return False
        assert host is not None  # served
        _, host_port = split_host(host)
        default = _DEFAULT_PORTS[parts.scheme]  # a Host without a port: the page's default
        return (port or default) == (host_port or default)


# What the gateway's HTTP app serves; `origin_allowed` reads it from the
# request's app (loopback names only when the app does not say).
SERVED_HOSTS: Final = web.AppKey("served_hosts", ServedHosts)
