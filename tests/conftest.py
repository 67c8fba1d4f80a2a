from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from tests.fakes.openai_server import FakeOpenAI

# the throwaway PostgreSQL cluster: fixtures postgres_server, postgres_url, storage_url,
# the `postgres` marker's skip (an error under CI) and its summary line
pytest_plugins = ["tests.postgres"]

# Loopback must never be proxied in tests.
os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost,::1")


# --- tests stay on loopback -----------------------------------------------------------
# The Python-level socket methods are patched once, when pytest loads this file, so
# every client built on them (asyncio's sock_connect calls `sock.connect`, and so
# aiohttp, httpx/anyio and websockets) is checked before the real syscall. Not covered:
# name resolution (getaddrinfo is C), subprocesses, and event loops that connect in C.


class NonLoopbackConnection(AssertionError):
    """A test tried to open a connection or send a datagram off this machine."""


_REAL_CONNECT = socket.socket.connect
_REAL_CONNECT_EX = socket.socket.connect_ex
_REAL_SENDTO = socket.socket.sendto
_REFUSED: list[str] = []  # so a refusal the code under test swallows still fails the test


def is_loopback(family: int, address: Any) -> bool:
    if family not in (socket.AF_INET, socket.AF_INET6):
        return True  # AF_UNIX, socketpair, netlink... never leave the machine
    host = address[0] if isinstance(address, tuple) and address else None
    if host == "localhost":
        return True
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0]) if isinstance(host, str) else None
    except ValueError:
        return False  # a hostname: the C call would resolve it, so refuse it here
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip is not None and ip.is_loopback


def _check(sock: socket.socket, address: Any) -> None:
    if not is_loopback(sock.family, address):
        shown = f"{address[0]}:{address[1]}" if isinstance(address, tuple) else repr(address)
        message = f"test tried to reach {shown}; tests must stay on loopback"
        _REFUSED.append(message)
        raise NonLoopbackConnection(message)


def _connect(self: socket.socket, address: Any) -> None:
    _check(self, address)
    return _REAL_CONNECT(self, address)


def _connect_ex(self: socket.socket, address: Any) -> int:
    _check(self, address)
    return _REAL_CONNECT_EX(self, address)


def _sendto(self: socket.socket, data: Any, *flags_address: Any) -> int:
    if flags_address:  # sendto(data, address) or sendto(data, flags, address)
        _check(self, flags_address[-1])
    return _REAL_SENDTO(self, data, *flags_address)


socket.socket.connect = _connect  # type: ignore[method-assign,assignment]
socket.socket.connect_ex = _connect_ex  # type: ignore[method-assign]
socket.socket.sendto = _sendto  # type: ignore[method-assign,assignment]


@pytest.fixture(autouse=True)
def _stay_on_loopback() -> Iterator[None]:
    yield
    if _REFUSED:
        refused, _REFUSED[:] = list(_REFUSED), []
        pytest.fail("\n".join(refused), pytrace=False)


@pytest.fixture(autouse=True)
def _plain_tracebacks() -> None:
    """Tests that do not configure logging get structlog's console output with
    plain tracebacks: its default renders every frame's locals with rich, which
    can take long enough on a slow machine to upset timing-sensitive tests."""
    if not structlog.is_configured():
        structlog.configure(
            processors=[
                structlog.contextvars.merge_contextvars,
                structlog.processors.add_log_level,
                structlog.processors.TimeStamper(fmt="%Y-%m-%d %H:%M:%S", utc=False),
                structlog.dev.ConsoleRenderer(
                    colors=False, exception_formatter=structlog.dev.plain_traceback
                ),
            ]
        )


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "picobot-home"
    path.mkdir()
    return path


@pytest.fixture
async def llm() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as fake:
        yield fake
