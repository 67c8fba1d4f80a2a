"""The address policy and guarded_fetch: refusals before any connection, pinned
resolution, redirects re-checked hop by hop, caps and timeouts."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from agent.tools.base import ToolError
from agent.tools.netguard import (
    MAX_REDIRECTS,
    AddressPolicy,
    PinnedResolver,
    VettedTarget,
    guarded_fetch,
    vet_url,
)

LOOPBACK_ONLY = AddressPolicy(exempt=(ipaddress.ip_network("127.0.0.1/32"),))
OPEN = AddressPolicy(allow_private=True)
STRICT = AddressPolicy()


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("10.0.0.1", "private"),
        ("192.168.1.1", "private"),
        ("172.16.0.1", "private"),
        ("169.254.169.254", "link-local"),
        ("0.0.0.0", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("100.64.0.1", "non-public"),
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fe80::1", "link-local"),
        ("fc00::1", "private"),
        ("ff02::1", "multicast"),
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:10.0.0.1", "private"),
        ("64:ff9b::a00:1", "private"),  # NAT64 of 10.0.0.1
        ("2002:7f00:1::", "loopback"),  # 6to4 of 127.0.0.1
    ],
)
def test_policy_refuses_non_public_addresses(address: str, reason: str) -> None:
    ip = ipaddress.ip_address(address)
    assert STRICT.refusal(ip) == reason
    assert OPEN.refusal(ip) is None


@pytest.mark.parametrize("address", ["8.8.8.8", "93.184.216.34", "2606:4700:4700::1111"])
def test_policy_allows_public_addresses(address: str) -> None:
    assert STRICT.refusal(ipaddress.ip_address(address)) is None


def test_exempt_networks_are_allowed_and_nothing_else() -> None:
    assert LOOPBACK_ONLY.refusal(ipaddress.ip_address("127.0.0.1")) is None
    assert LOOPBACK_ONLY.refusal(ipaddress.ip_address("127.0.0.2")) == "loopback"


@pytest.mark.parametrize(
    ("url", "address"),
    [
        ("http://127.0.0.1/", "127.0.0.1"),
        ("http://10.0.0.1/", "10.0.0.1"),
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254"),
        ("http://[::1]:8080/", "::1"),
        ("https://localhost/", ""),  # a hostname resolving to loopback
        ("http://2130706433/", "127.0.0.1"),  # decimal form of 127.0.0.1
        ("http://127.1/", "127.0.0.1"),
    ],
)
async def test_vet_url_refuses_private_targets(url: str, address: str) -> None:
    with pytest.raises(ToolError, match="refusing to connect to") as info:
        await vet_url(url, STRICT)
    assert address in str(info.value)


@pytest.mark.parametrize(
    "url", ["file:///etc/passwd", "ftp://example.com/x", "gopher://x", "javascript:alert(1)"]
)
async def test_vet_url_refuses_other_schemes(url: str) -> None:
    with pytest.raises(ToolError, match="is not allowed; use http"):
        await vet_url(url, STRICT)


async def test_vet_url_accepts_a_public_literal_without_dns() -> None:
    target = await vet_url("https://8.8.8.8/dns", STRICT)
    assert target.addresses == ((socket.AF_INET, "8.8.8.8"),)
    assert target.host == "8.8.8.8"


# ---------------------------------------------------------------- against a real server


def _app() -> web.Application:
    never = asyncio.Event()

    async def ok(request: web.Request) -> web.Response:
        return web.json_response(
            {
                "method": request.method,
                "body": await request.text(),
                "auth": request.headers.get("Authorization"),
                "path": request.path,
            }
        )

    async def redirect(request: web.Request) -> web.Response:
        status = int(request.query.get("status", "302"))
        return web.Response(status=status, headers={"Location": request.query["to"]})

    async def loop(request: web.Request) -> web.Response:
        raise web.HTTPFound("/loop")

    async def big(request: web.Request) -> web.Response:
        return web.Response(body=b"x" * 10_000, content_type="text/plain")

    async def hang(request: web.Request) -> web.Response:
        await never.wait()
        raise AssertionError("unreachable")

    app = web.Application()
    app.router.add_route("*", "/ok", ok)
    app.router.add_route("*", "/redirect", redirect)
    app.router.add_get("/loop", loop)
    app.router.add_get("/big", big)
    app.router.add_get("/hang", hang)
    return app


@pytest.fixture
async def server() -> AsyncIterator[TestServer]:
    srv = TestServer(_app(), host="127.0.0.1")
    async with srv:
        yield srv


@pytest.fixture
async def other_server() -> AsyncIterator[TestServer]:
    srv = TestServer(_app(), host="127.0.0.1")
    async with srv:
        yield srv


async def test_fetch_succeeds_when_allowed(server: TestServer) -> None:
    response = await guarded_fetch(
        "POST", str(server.make_url("/ok")), policy=OPEN, timeout_secs=5, max_bytes=1000,
        body="hello",
    )  # fmt: skip
    assert response.status == 200
    assert response.content_type == "application/json"
    assert b'"method": "POST"' in response.body
    assert b'"body": "hello"' in response.body
    assert not response.truncated


async def test_fetch_refuses_the_test_server_when_private_is_off(server: TestServer) -> None:
    with pytest.raises(ToolError, match=r"refusing to connect to 127\.0\.0\.1"):
        await guarded_fetch(
            "GET", str(server.make_url("/ok")), policy=STRICT, timeout_secs=5, max_bytes=10
        )


@pytest.mark.parametrize(
    "to",
    [
        "http://10.0.0.1/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]/",
        "http://127.0.0.2/",
        "file:///etc/passwd",
    ],
)
async def test_redirect_to_a_private_address_is_refused(server: TestServer, to: str) -> None:
    url = server.make_url("/redirect").with_query(to=to)
    with pytest.raises(ToolError, match=r"refusing to connect|is not allowed"):
        await guarded_fetch("GET", str(url), policy=LOOPBACK_ONLY, timeout_secs=5, max_bytes=10)


async def test_redirects_are_followed_and_recorded(server: TestServer) -> None:
    hop2 = server.make_url("/redirect").with_query(to="/ok")
    url = server.make_url("/redirect").with_query(to=str(hop2))
    response = await guarded_fetch("GET", str(url), policy=OPEN, timeout_secs=5, max_bytes=10_000)
    assert response.status == 200
    assert response.url == str(server.make_url("/ok"))
    assert response.redirects == (str(hop2), str(server.make_url("/ok")))


async def test_too_many_redirects(server: TestServer) -> None:
    with pytest.raises(ToolError, match=f"too many redirects \\(more than {MAX_REDIRECTS}\\)"):
        await guarded_fetch(
            "GET", str(server.make_url("/loop")), policy=OPEN, timeout_secs=5, max_bytes=10
        )


@pytest.mark.parametrize(("status", "method"), [(303, "GET"), (302, "GET"), (307, "POST")])
async def test_redirect_method_rules(server: TestServer, status: int, method: str) -> None:
    url = server.make_url("/redirect").with_query(to="/ok", status=str(status))
    response = await guarded_fetch(
        "POST", str(url), policy=OPEN, timeout_secs=5, max_bytes=10_000, body="payload"
    )
    assert f'"method": "{method}"'.encode() in response.body
    assert (b'"body": "payload"' in response.body) is (method == "POST")


async def test_credentials_are_dropped_on_cross_origin_redirects(
    server: TestServer, other_server: TestServer
) -> None:
    same = server.make_url("/redirect").with_query(to="/ok")
    cross = server.make_url("/redirect").with_query(to=str(other_server.make_url("/ok")))
    headers = {"Authorization": "Bearer s3cret"}
    kept = await guarded_fetch(
        "GET", str(same), policy=OPEN, timeout_secs=5, max_bytes=10_000, headers=headers
    )
    dropped = await guarded_fetch(
        "GET", str(cross), policy=OPEN, timeout_secs=5, max_bytes=10_000, headers=headers
    )
    assert b'"auth": "Bearer s3cret"' in kept.body
    assert b'"auth": null' in dropped.body


async def test_body_is_capped(server: TestServer) -> None:
    response = await guarded_fetch(
        "GET", str(server.make_url("/big")), policy=OPEN, timeout_secs=5, max_bytes=1000
    )
    assert (len(response.body), response.truncated) == (1000, True)


async def test_timeout(server: TestServer) -> None:
    with pytest.raises(ToolError, match=r"request timed out after 0\.3s"):
        await guarded_fetch(
            "GET", str(server.make_url("/hang")), policy=OPEN, timeout_secs=0.3, max_bytes=10
        )


async def test_connection_failure_is_a_tool_error() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(ToolError, match="request failed: Client"):
        await guarded_fetch(
            "GET", f"http://127.0.0.1:{port}/", policy=OPEN, timeout_secs=5, max_bytes=10
        )


async def test_pinned_resolver_connects_to_the_vetted_address_only(server: TestServer) -> None:
    # "pinned.invalid" cannot be resolved by DNS: reaching the server proves the
    # connection used the vetted address and never asked DNS again.
    target = VettedTarget(
        server.make_url("/ok").with_host("pinned.invalid"),
        "pinned.invalid",
        ((socket.AF_INET, "127.0.0.1"),),
    )
    resolver = PinnedResolver(target)
    connector = aiohttp.TCPConnector(resolver=resolver, use_dns_cache=False)
    async with aiohttp.ClientSession(connector=connector) as session:
        async with session.get(target.url) as response:
            assert response.status == 200
        with pytest.raises(aiohttp.ClientConnectorError):
            await session.get(target.url.with_host("other.invalid"))
    assert [r["host"] for r in await resolver.resolve("PINNED.invalid.", 80)] == ["127.0.0.1"]
    assert await resolver.resolve("pinned.invalid", 80, socket.AF_INET6) == []
