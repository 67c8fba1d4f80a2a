"""The host names the gateway serves and the browser origins that may use it
(channels.served_hosts; the real server is attacked in tests/e2e/test_host_origin.py)."""

from __future__ import annotations

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from channels.base import SERVED_HOSTS, ServedHosts, origin_allowed
from channels.served_hosts import host_name, split_host

SERVED = ServedHosts.of(["chat.example.com:8443", "[2001:db8::7]"], bound="10.0.0.5")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("127.0.0.1:19876", ("127.0.0.1", 19876)),
        ("LocalHost.", ("localhost", None)),
        ("[::1]:80", ("::1", 80)),
        ("::1", ("::1", None)),
        ("Chat.Example.COM", ("chat.example.com", None)),
    ],
)
def test_a_host_value_splits_into_a_lowercased_name_and_a_port(
    value: str, expected: tuple[str, int | None]
) -> None:
    assert split_host(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        "",
        "evil.example@127.0.0.1",
        "127.0.0.1/x",
        "*.example.com",
        "a b",
        "host:",
        "host:0",
        "host:65536",
        "host:8x",
        "[::1",
        "[not-v6]:80",
        "bücher.example",
        "a..b",
    ],
)
def test_what_is_not_a_host_is_refused(value: str) -> None:
    with pytest.raises(ValueError):
        split_host(value)
    assert host_name(value) is None


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1:19876",
        "127.3.4.5",
        "localhost:1",
        "localhost.",
        "[::1]:19876",
        "chat.example.com",
        "chat.example.com:1234",  # the port never decides: a proxy may rewrite it
        "[2001:db8::7]:19876",
        "10.0.0.5:19876",  # the address the gateway is bound to
    ],
)
def test_loopback_public_and_bound_names_are_served(host: str) -> None:
    assert SERVED.serves(host)


@pytest.mark.parametrize(
    "host",
    [
        None,  # HTTP/1.0 without Host
        "",
        "evil.example:19876",
        "127.0.0.1.evil.example",
        "localhost.evil.example",
        "10.0.0.6:19876",
        "example.com",
        "evil.example@127.0.0.1",
    ],
)
def test_any_other_host_is_not(host: str | None) -> None:
    assert not SERVED.serves(host)


def test_a_wildcard_bind_names_no_host() -> None:
    for bound in ("0.0.0.0", "::", ""):
        assert ServedHosts.of([], bound) == ServedHosts()
    assert ServedHosts.of([], "127.0.0.1").serves("127.0.0.1")


@pytest.mark.parametrize(
    ("origin", "host", "allowed"),
    [
        ("http://127.0.0.1:19876", "127.0.0.1:19876", True),
        ("http://localhost:19876", "127.0.0.1:19876", True),  # both loopback, same port
        ("http://localhost", "localhost", True),
        ("https://localhost", "localhost", True),
        ("http://localhost:80", "localhost", True),
        ("http://10.0.0.5:19876", "10.0.0.5:19876", True),
        ("https://chat.example.com", "chat.example.com", True),
        ("https://chat.example.com", "127.0.0.1:19876", True),  # a proxy rewrote the Host
        ("http://chat.example.com:8080", "chat.example.com", True),  # public: any port
        # DNS rebinding: origin and Host agree, neither is served
        ("http://evil.example:19876", "evil.example:19876", False),
        ("http://evil.example:19876", "127.0.0.1:19876", False),
        ("http://evil.example", "chat.example.com", False),
        # another program's page on this machine
        ("http://localhost:3000", "localhost:19876", False),
        ("http://127.0.0.1:3000", "127.0.0.1:19876", False),
        ("http://10.0.0.5:3000", "10.0.0.5:19876", False),
        # not a page's origin
        ("null", "127.0.0.1:19876", False),
        ("file://", "127.0.0.1:19876", False),
        ("chrome-extension://abc", "127.0.0.1:19876", False),
        ("http://user@127.0.0.1:19876", "127.0.0.1:19876", False),
        ("http://127.0.0.1:19876/x", "127.0.0.1:19876", False),
        ("http://[::1", "127.0.0.1:19876", False),
        # a served origin but a Host the gateway does not serve
        ("http://127.0.0.1:19876", "evil.example:19876", False),
        ("http://127.0.0.1:19876", None, False),
    ],
)
def test_an_origin_is_judged_by_the_served_names(
    origin: str, host: str | None, allowed: bool
) -> None:
    assert SERVED.origin_allowed(origin, host) is allowed


def _request(app: web.Application, headers: dict[str, str]) -> web.Request:
    return make_mocked_request("GET", "/ws", headers=headers, app=app)


def test_origin_allowed_reads_the_served_names_from_the_app() -> None:
    app = web.Application()
    app[SERVED_HOSTS] = SERVED
    public = {"Host": "chat.example.com", "Origin": "https://chat.example.com"}
    assert origin_allowed(_request(app, public))
    assert origin_allowed(_request(app, {"Host": "evil.example"}))  # programs send no Origin
    rebound = {"Host": "evil.example:1", "Origin": "http://evil.example:1"}
    assert not origin_allowed(_request(app, rebound))
    # an exact origin listed by the surface (channels.websocket.allowed_origins)
    other = {"Host": "127.0.0.1:1", "Origin": "https://ui.example.net"}
    assert not origin_allowed(_request(app, other))
    assert origin_allowed(_request(app, other), ("https://ui.example.net",))
    null = {"Host": "127.0.0.1:1", "Origin": "null"}
    assert not origin_allowed(_request(app, null), ("null",))
    # an app that does not say serves loopback names only
    bare = web.Application()
    assert origin_allowed(_request(bare, {"Host": "localhost:1", "Origin": "http://localhost:1"}))
    assert not origin_allowed(_request(bare, public))


def test_config_entries_are_checked() -> None:
    assert ServedHosts.check_entry(" Chat.Example.com:8443 ") == "chat.example.com:8443"
    for bad in ("https://chat.example.com", "chat.example.com/", "*.example.com", "a@b"):
        with pytest.raises(ValueError, match=r"'"):
            ServedHosts.check_entry(bad)
    assert ServedHosts.check_url("https://chat.example.com/") == "https://chat.example.com/"
    for bad in ("chat.example.com", "ftp://x", "https://u:p@x", "https://x/?a=1", "https://x#f"):
        with pytest.raises(ValueError, match=r"'"):
            ServedHosts.check_url(bad)
