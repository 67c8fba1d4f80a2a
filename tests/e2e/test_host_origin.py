"""The HTTP server of a real `picobot gateway` process serves only its own host
names: a DNS-rebinding page (`Host: evil.example:PORT` and the matching
`Origin`, sent to 127.0.0.1) reaches nothing but the probes; loopback names and
a configured public host work, a foreign page on a served host does not; and
a flood of malformed requests logs one warning, not a traceback each."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.wecom_kf_server import FakeWecomKf
from tests.support import GatewayProcess, child_env, spawn_gateway, wait_until

pytestmark = pytest.mark.slow

PUBLIC = "chat.example.com"
WEBHOOK = "/webhooks/wecom_kf"


@pytest.fixture
async def gateway(home: Path, llm: FakeOpenAI) -> AsyncIterator[tuple[GatewayProcess, FakeWecomKf]]:
    """The WebSocket channel (web UI, /api/ops) and a webhook channel, with
    one public host name, on a real gateway process."""
    async with FakeWecomKf() as fake:
        config = {
            "providers": {
                "default": {"base_url": llm.base_url, "api_key": "test-key", "max_retries": 0}
            },
            "models": {"default": {"model_id": "fake-model"}},
            "gateway": {"port": 0, "shutdown_timeout_secs": 10, "public_hosts": [PUBLIC]},
            "logging": {"format": "json"},
            "channels": {"wecom_kf": fake.settings()},
        }
        gw = await spawn_gateway(config, home, child_env(home))
        try:
            yield gw, fake
        finally:
            assert await gw.stop() == 0


async def _status(
    http: aiohttp.ClientSession,
    gw: GatewayProcess,
    path: str,
    host: str,
    origin: str | None = None,
    method: str = "GET",
) -> int:
    headers = {"Host": host, **({"Origin": origin} if origin else {})}
    url = f"http://127.0.0.1:{gw.port}{path}"
    async with http.request(
        method, url, headers=headers, data=b"" if method == "POST" else None
    ) as r:
        await r.read()
        return r.status


async def _ws(http: aiohttp.ClientSession, gw: GatewayProcess, host: str, origin: str) -> Any:
    """The first frame's type after a hello, or the status the upgrade was refused with."""
    url = f"ws://127.0.0.1:{gw.port}/ws"
    try:
        async with http.ws_connect(url, headers={"Host": host, "Origin": origin}) as ws:
            await ws.send_json({"type": "hello", "protocol": 1})
            return (await ws.receive_json(timeout=10))["type"]
    except aiohttp.WSServerHandshakeError as refused:
        return refused.status


async def _raw(port: int, request: bytes, local: str = "127.0.0.1") -> bytes:
    """Send `request` bytes as they are and read the answer until the server closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(local, 0))
    try:
        writer.write(request)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
        await writer.wait_closed()


async def test_a_rebinding_page_reaches_nothing_but_the_probes(
    gateway: tuple[GatewayProcess, FakeWecomKf],
) -> None:
    gw, _ = gateway
    evil, evil_origin = f"evil.example:{gw.port}", f"http://evil.example:{gw.port}"
    async with aiohttp.ClientSession() as http:
        assert await _ws(http, gw, evil, evil_origin) == 421
        for path in ("/api/ops/outbox", "/api/ops/jobs", "/", "/index.html", WEBHOOK, "/metrics"):
            assert await _status(http, gw, path, evil, evil_origin) == 421, path
            assert await _status(http, gw, path, evil) == 421, path  # no Origin: the same
        assert await _status(http, gw, WEBHOOK, evil, method="POST") == 421
        # neither another spelling of a foreign name nor a loopback-looking prefix
        for host in ("evil.example", "127.0.0.1.evil.example", "localhost@evil.example", ""):
            assert await _status(http, gw, "/api/ops/outbox", host) == 421, host
        # the probes reveal nothing and a load balancer may probe by IP address
        assert await _status(http, gw, "/health", evil) == 200
        assert await _status(http, gw, "/ready", evil) in (200, 503)
    # HTTP/1.0 without a Host header: refused too, except the probes
    answer = await _raw(gw.port, b"GET /api/ops/outbox HTTP/1.0\r\n\r\n")
    assert answer.startswith((b"HTTP/1.0 421", b"HTTP/1.1 421")), answer[:40]
    assert b" 200 " in (await _raw(gw.port, b"GET /health HTTP/1.0\r\n\r\n")).split(b"\r\n")[0]


async def test_loopback_names_and_a_public_host_work_and_a_foreign_page_does_not(
    gateway: tuple[GatewayProcess, FakeWecomKf],
) -> None:
    gw, fake = gateway
    port = gw.port
    async with aiohttp.ClientSession() as http:
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"):
            origin = f"http://{host}"
            assert await _ws(http, gw, host, origin) == "welcome", host
            assert await _status(http, gw, "/api/ops/outbox", host, origin) == 200, host
            assert await _status(http, gw, "/", host) == 200, host
        # the operator's public name, behind a proxy that keeps the Host (any port)
        for host in (PUBLIC, f"{PUBLIC}:8443"):
            assert await _ws(http, gw, host, f"https://{PUBLIC}") == "welcome"
            assert await _status(http, gw, "/api/ops/outbox", host, f"https://{PUBLIC}") == 200
        # a page of another site, or another program's page on localhost, on a served host
        own = f"127.0.0.1:{port}"
        for host, origin in (
            (PUBLIC, "http://evil.example"),
            (own, "http://evil.example"),
            (own, f"http://evil.example:{port}"),
            (own, "http://localhost:3000"),
            (own, "null"),
        ):
            assert await _ws(http, gw, host, origin) == 403, (host, origin)
            assert await _status(http, gw, "/api/ops/outbox", host, origin) == 403, (host, origin)
    # the webhook answers its platform on a served name
    assert await fake.notify(f"http://127.0.0.1:{port}{WEBHOOK}") == (200, "success")


def _malformed(gw: GatewayProcess) -> list[dict[str, Any]]:
    return gw.events("http_request_malformed")


async def test_fifty_malformed_requests_from_one_peer_log_one_warning(
    gateway: tuple[GatewayProcess, FakeWecomKf],
) -> None:
    """aiohttp logged each at error level with a traceback; now one warning a
    minute per peer. A second peer's line, logged after them, shows that all
    fifty were handled (and logged, or not) by then."""
    gw, _ = gateway
    long_url = b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    bad_header = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Header: x\r\n\r\n"
    for n in range(50):
        answer = await _raw(gw.port, long_url if n % 2 else bad_header)
        assert answer.split(b"\r\n")[0].endswith(b" 400 Bad Request"), answer[:40]
    await _raw(gw.port, bad_header, local="127.0.0.2")
    await wait_until(lambda: any(line["peer"] == "127.0.0.2" for line in _malformed(gw)))
    lines = _malformed(gw)
    assert [line["peer"] for line in lines] == ["127.0.0.1", "127.0.0.2"]
    for line in lines:
        assert line["level"] == "warning"
        assert line["suppressed"] == 0
        assert line["status"] == 400
        assert "exception" not in line
        assert "exc_info" not in line
    assert not [
        line
        for line in gw.lines
        if line.get("logger") == "aiohttp.server" and line["level"] == "error"
    ]
    assert not [line for line in gw.lines if "Traceback" in str(line)]
