"""The conftest guard: a test that tries to leave loopback fails before any packet is sent.

Every refusal test runs under `no_real_network`, which swaps the guard's saved real
socket calls for recorders, so even a broken guard could not reach the address.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest

from tests import conftest as guard

TEST_NET = ("192.0.2.1", 9)  # RFC 5737 documentation range, discard port
TEST_NET6 = ("2001:db8::1", 9)  # RFC 3849


@pytest.fixture
def no_real_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, Any]]]:
    reached: list[tuple[str, Any]] = []

    def recorder(name: str) -> Any:
        def call(sock: socket.socket, *args: Any) -> Any:
            reached.append((name, args))
            raise RuntimeError(f"the guard let {name}{args} through to the real socket")

        return call

    for name in ("_REAL_CONNECT", "_REAL_CONNECT_EX", "_REAL_SENDTO"):
        monkeypatch.setattr(guard, name, recorder(name))
    yield reached
    guard._REFUSED.clear()  # these tests are meant to be refused
    assert reached == []


def test_the_guard_is_installed_from_the_loaded_conftest() -> None:
    assert sys.modules["tests.conftest"] is guard
    assert socket.socket.connect is guard._connect
    assert socket.socket.connect_ex is guard._connect_ex
    assert socket.socket.sendto is guard._sendto


def test_a_plain_socket_to_test_net_is_refused(no_real_network: list[Any]) -> None:
    with socket.socket() as sock:
        with pytest.raises(guard.NonLoopbackConnection, match=r"192\.0\.2\.1:9; tests must stay"):
            sock.connect(TEST_NET)
        with pytest.raises(guard.NonLoopbackConnection):
            sock.connect_ex(TEST_NET)
        with pytest.raises(guard.NonLoopbackConnection):
            sock.connect(("example.com", 80))  # a hostname the C call would resolve


def test_a_datagram_to_test_net_is_refused(no_real_network: list[Any]) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        with pytest.raises(guard.NonLoopbackConnection):
            sock.sendto(b"x", TEST_NET)
        with pytest.raises(guard.NonLoopbackConnection):
            sock.sendto(b"x", 0, TEST_NET)


def test_ipv6_off_loopback_is_refused(no_real_network: list[Any]) -> None:
    try:
        sock = socket.socket(socket.AF_INET6)
    except OSError:
        pytest.skip("no IPv6 sockets on this machine")
    with sock, pytest.raises(guard.NonLoopbackConnection, match=r"2001:db8::1:9"):
        sock.connect(TEST_NET6)


async def test_asyncio_open_connection_is_refused(no_real_network: list[Any]) -> None:
    with pytest.raises(guard.NonLoopbackConnection):
        await asyncio.open_connection(*TEST_NET)


async def test_aiohttp_is_refused(no_real_network: list[Any]) -> None:
    async with aiohttp.ClientSession() as session:
        with pytest.raises(guard.NonLoopbackConnection):
            await session.get("http://192.0.2.1:9/")


async def test_httpx_is_refused(no_real_network: list[Any]) -> None:
    async with httpx.AsyncClient() as client:
        with pytest.raises(ExceptionGroup) as raised:  # anyio's happy-eyeballs task group
            await client.get("http://192.0.2.1:9/")
    assert raised.group_contains(guard.NonLoopbackConnection)


def test_a_swallowed_refusal_is_still_recorded(no_real_network: list[Any]) -> None:
    # what a careless `except Exception` retry loop in the code under test would do:
    with socket.socket() as sock, contextlib.suppress(Exception):
        sock.connect(TEST_NET)
    # the autouse _stay_on_loopback fixture fails any test that leaves this non-empty
    assert guard._REFUSED == ["test tried to reach 192.0.2.1:9; tests must stay on loopback"]


@pytest.mark.parametrize(
    ("family", "address", "ok"),
    [
        (socket.AF_INET, ("127.0.0.1", 80), True),
        (socket.AF_INET, ("127.8.9.10", 80), True),
        (socket.AF_INET, ("localhost", 80), True),
        (socket.AF_INET, ("0.0.0.0", 80), False),
        (socket.AF_INET, ("10.0.0.1", 80), False),
        (socket.AF_INET, ("<broadcast>", 80), False),
        (socket.AF_INET6, ("::1", 80, 0, 0), True),
        (socket.AF_INET6, ("::ffff:127.0.0.1", 80, 0, 0), True),
        (socket.AF_INET6, ("::ffff:192.0.2.1", 80, 0, 0), False),
        (socket.AF_INET6, ("fe80::1%lo", 80, 0, 0), False),
        (socket.AF_INET, "127.0.0.1:80", False),  # malformed: refuse rather than guess
        (socket.AF_UNIX, "/tmp/picobot.sock", True),
    ],
)
def test_what_counts_as_loopback(family: int, address: Any, ok: bool) -> None:
    assert guard.is_loopback(family, address) is ok


def test_a_plain_socket_to_a_loopback_server_works() -> None:
    with (
        socket.create_server(("127.0.0.1", 0)) as server,
        socket.create_connection(server.getsockname(), timeout=5) as client,
    ):
        peer, _ = server.accept()
        with peer:
            client.sendall(b"ping")
            assert peer.recv(4) == b"ping"


async def test_asyncio_to_a_loopback_server_works() -> None:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(await reader.readexactly(4))
        await writer.drain()
        writer.close()
        await writer.wait_closed()

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    async with server:
        reader, writer = await asyncio.open_connection(*server.sockets[0].getsockname())
        writer.write(b"ping")
        assert await reader.readexactly(4) == b"ping"
        writer.close()
        await writer.wait_closed()


def test_unix_sockets_are_not_checked(tmp_path: Path) -> None:
    path = str(tmp_path / "s")
    with socket.socket(socket.AF_UNIX) as server, socket.socket(socket.AF_UNIX) as client:
        server.bind(path)
        server.listen()
        client.connect(path)
