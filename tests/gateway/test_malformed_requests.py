"""aiohttp's malformed-request errors become one warning per peer per interval
(gateway.ops.malformed_requests), through the real log pipeline and a real server."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import structlog
from aiohttp import web
from aiohttp.http_exceptions import BadHttpMessage, LineTooLong

from gateway.ops.logging import configure_logging
from gateway.ops.malformed_requests import SERVER_LOGGER, MalformedRequestFilter

LONG_URL = b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


@pytest.fixture
def log_out() -> Iterator[io.StringIO]:
    """The gateway's JSON log pipeline writing to a string; undone afterwards."""
    root, server = logging.getLogger(), logging.getLogger(SERVER_LOGGER)
    handlers, level, filters = list(root.handlers), root.level, list(server.filters)
    out = io.StringIO()
    configure_logging("info", "json", stream=out)
    yield out
    for handler in [h for h in root.handlers if h not in handlers]:
        root.removeHandler(handler)
    root.setLevel(level)
    for extra in [f for f in server.filters if f not in filters]:
        server.removeFilter(extra)
    structlog.reset_defaults()


def _lines(out: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


@pytest.fixture
async def server() -> AsyncIterator[int]:
    """A bare aiohttp server on 127.0.0.1 (the gateway's runner is the same)."""

    async def ok(_request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/", ok)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield runner.addresses[0][1]
    finally:
        await runner.cleanup()


async def _send(port: int, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        return await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
        await writer.wait_closed()


async def test_a_malformed_request_logs_one_warning_without_a_traceback(
    log_out: io.StringIO, server: int
) -> None:
    answer = await _send(server, LONG_URL)
    assert answer.split(b"\r\n")[0].endswith(b" 400 Bad Request")
    (line,) = _lines(log_out)
    assert line["event"] == "http_request_malformed"
    assert line["level"] == "warning"
    assert line["logger"] == SERVER_LOGGER
    assert (line["peer"], line["status"], line["suppressed"]) == ("127.0.0.1", 400, 0)
    assert line["error"] == "LineTooLong"
    assert "exception" not in line
    assert "Traceback" not in log_out.getvalue()


async def test_fifty_from_one_peer_log_one_line(log_out: io.StringIO, server: int) -> None:
    for n in range(50):
        bad_header = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Header%d: x\r\n\r\n" % n
        await _send(server, LONG_URL if n % 2 else bad_header)
    assert [line["event"] for line in _lines(log_out)] == ["http_request_malformed"]
    assert (await _send(server, b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))[
        :12
    ] == b"HTTP/1.1 200"


def _record(peer: str = "192.0.2.1", exc: Exception | None = None) -> logging.LogRecord:
    exc = exc or LineTooLong(b"a" * 9000, 8190)
    return logging.LogRecord(
        SERVER_LOGGER,
        logging.ERROR,
        __file__,
        1,
        "Error handling request from %s",
        (peer,),
        (type(exc), exc, None),
    )


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_one_line_per_peer_per_interval_with_the_count_suppressed() -> None:
    clock = Clock()
    throttle = MalformedRequestFilter(interval_secs=60, clock=clock)
    assert throttle.filter(first := _record())
    assert (first.levelno, first.getMessage(), first.exc_info) == (
        logging.WARNING,
        "http_request_malformed",
        None,
    )
    assert not any(throttle.filter(_record()) for _ in range(49))
    assert throttle.filter(_record("192.0.2.2"))  # another peer has its own line
    clock.now += 59.9
    assert not throttle.filter(_record())
    clock.now += 0.1
    assert throttle.filter(later := _record())
    assert later.__dict__["suppressed"] == 50
    clock.now += 60
    assert throttle.filter(again := _record())
    assert again.__dict__["suppressed"] == 0


def test_the_peer_table_is_bounded() -> None:
    clock = Clock()
    throttle = MalformedRequestFilter(interval_secs=60, max_peers=3, clock=clock)
    assert all(throttle.filter(_record(f"192.0.2.{n}")) for n in range(3))
    # the table is full of live peers: the rest share one line an interval
    assert throttle.filter(other := _record("192.0.2.50"))
    assert other.__dict__["peer"] == "other"
    assert not any(throttle.filter(_record(f"198.51.100.{n}")) for n in range(200))
    assert len(throttle._peers) <= 3
    clock.now += 60  # an expired peer makes room for a new one
    assert throttle.filter(fresh := _record("203.0.113.9"))
    assert fresh.__dict__["peer"] == "203.0.113.9"
    assert len(throttle._peers) <= 3


def test_other_records_pass_unchanged() -> None:
    throttle = MalformedRequestFilter()
    crash = _record(exc=RuntimeError("a handler of ours failed"))
    assert throttle.filter(crash)
    assert crash.levelno == logging.ERROR
    assert crash.exc_info is not None
    assert all(throttle.filter(_record(exc=ValueError("x"))) for _ in range(5))
    # a message that quotes what the peer sent is cut short and on one line
    assert throttle.filter(bad := _record(exc=BadHttpMessage("x\n" * 500)))
    assert "\n" not in bad.__dict__["reason"]
    assert len(bad.__dict__["reason"]) <= 120
