"""The log pipeline: JSON/console rendering, stdlib routing, bound context, redaction."""

from __future__ import annotations

import functools
import io
import json
import logging
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from agent.messages import ChatMessage
from agent.providers.base import LLMRequest, ProviderSettings
from agent.providers.openai import OpenAIProvider
from gateway.ops.logging import (
    MASK,
    clear_secrets,
    configure_logging,
    redact_data,
    register_secrets,
)
from storage.sqlite.db import Database
from tests.fakes.openai_server import FakeOpenAI
from tests.support import logging_restored

ANSI = re.compile(r"\x1b\[[0-9;]*m")


class TtyStream(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    with logging_restored():
        yield
    clear_secrets()


def json_lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_json_lines_parse_and_carry_bound_context() -> None:
    out = io.StringIO()
    configure_logging("info", "json", stream=out)
    log = structlog.get_logger("picobot.test")

    structlog.contextvars.bind_contextvars(
        channel="telegram", session_id="telegram:42", run_id="r-7"
    )
    log.info("turn_done", iterations=3)
    structlog.contextvars.clear_contextvars()
    log.info("idle")

    first, second = json_lines(out)
    assert first["event"] == "turn_done"
    assert first["iterations"] == 3
    assert (first["channel"], first["session_id"], first["run_id"]) == (
        "telegram",
        "telegram:42",
        "r-7",
    )
    assert first["level"] == "info"
    assert first["logger"] == "picobot.test"
    assert first["timestamp"].endswith("Z")
    assert "channel" not in second
    assert "run_id" not in second


def test_a_value_orjson_refuses_still_makes_a_json_line() -> None:
    """Lines are rendered by orjson; an integer beyond 64 bits, which it
    refuses, still makes a line (json's), and text is not escaped."""
    out = io.StringIO()
    configure_logging("info", "json", stream=out)
    log = structlog.get_logger("picobot.test")
    log.info("odd_values", big=2**70)
    log.info("plain", text="ünïcode")
    odd, plain = json_lines(out)
    assert (odd["event"], odd["big"]) == ("odd_values", 2**70)
    assert plain["text"] == "ünïcode"
    assert "ünïcode" in out.getvalue()


def test_a_value_nested_deeper_than_python_recurses_makes_a_line_cut_short() -> None:
    """A model's tool arguments may nest past any recursion limit: what is
    logged or shown of them stops at 16 levels, a secret above still masked."""
    deep: list[Any] = []
    for _ in range(5_000):
        deep = [deep]
    out = io.StringIO()
    configure_logging("info", "json", stream=out)
    structlog.get_logger("picobot.test").info("deep", value={"token": "sk-x", "rest": deep})
    (line,) = json_lines(out)
    assert line["value"]["token"] == MASK
    shown = redact_data({"rest": deep})["rest"]
    for _ in range(15):
        (shown,) = shown
    assert shown == "…"


def test_auto_format_is_json_when_not_a_tty() -> None:
    out = io.StringIO()
    configure_logging("info", "auto", stream=out)
    structlog.get_logger("x").info("started", port=19876)
    (line,) = json_lines(out)
    assert line["port"] == 19876


def test_auto_format_is_human_readable_on_a_tty() -> None:
    out = TtyStream()
    configure_logging("info", "auto", stream=out)
    structlog.contextvars.bind_contextvars(channel="feishu")
    structlog.get_logger("picobot.test").info("started", port=19876)

    text = out.getvalue()
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    plain = ANSI.sub("", text)
    assert "started" in plain
    assert "port=19876" in plain
    assert "channel=feishu" in plain
    assert "[info" in plain


def test_stdlib_and_library_logs_go_through_the_same_pipeline() -> None:
    out = io.StringIO()
    configure_logging("info", "json", stream=out)
    structlog.contextvars.bind_contextvars(run_id="r-1")

    logging.getLogger("aiohttp.access").info("%s %s %d", "GET", "/health", 200)

    (line,) = json_lines(out)
    assert line["event"] == "GET /health 200"
    assert line["logger"] == "aiohttp.access"
    assert line["level"] == "info"
    assert line["run_id"] == "r-1"


def test_level_filters_both_structlog_and_stdlib() -> None:
    out = io.StringIO()
    configure_logging("warning", "json", stream=out)
    structlog.get_logger("a").info("quiet")
    logging.getLogger("b").info("quiet too")
    structlog.get_logger("a").warning("loud")
    logging.getLogger("b").error("louder")
    assert [line["event"] for line in json_lines(out)] == ["loud", "louder"]


def test_per_request_library_lines_only_at_debug() -> None:
    out = io.StringIO()
    configure_logging("info", "json", stream=out)
    logging.getLogger("httpx").info("HTTP Request: POST http://x/v1/chat/completions 200")
    logging.getLogger("httpx").warning("retrying")
    assert [line["event"] for line in json_lines(out)] == ["retrying"]

    out = io.StringIO()
    configure_logging("debug", "json", stream=out)
    logging.getLogger("httpx").info("HTTP Request: POST http://x/v1/chat/completions 200")
    assert len(json_lines(out)) == 1


async def test_storage_jobs_write_no_line_of_their_own_even_at_debug(tmp_path: Path) -> None:
    """aiosqlite logs each job's repr (a turn's carries the chat's history) at
    debug: held at warning, so a debug log does not grow with a chat's length
    nor carry its messages; its warnings still show."""
    out = io.StringIO()
    configure_logging("debug", "json", stream=out)
    db = await Database(tmp_path / "picobot.db").open()
    try:
        text = "a message only the chat should hold"
        await db.write(functools.partial(_select_text, text=text))
    finally:
        await db.close()
    logging.getLogger("aiosqlite").warning("connection trouble")
    lines = json_lines(out)
    assert not [line for line in lines if text in json.dumps(line)]
    assert [line["event"] for line in lines if line["logger"] == "aiosqlite"] == [
        "connection trouble"
    ]
    structlog.get_logger("picobot.test").debug("ours")
    assert json_lines(out)[-1]["event"] == "ours"  # debug itself is still on


def _select_text(conn: sqlite3.Connection, text: str) -> str:
    value: str = conn.execute("SELECT ?", (text,)).fetchone()[0]
    return value


def _client_lines(out: io.StringIO) -> list[dict[str, Any]]:
    """Leaving out the fake server's own access log."""
    return [line for line in json_lines(out) if line["logger"] != "aiohttp.access"]


async def test_the_sdk_http_client_logs_nothing_per_call_at_info(llm: FakeOpenAI) -> None:
    """No line per request at info: neither for a provider's call nor for a
    request on the OpenAI SDK's own HTTP client (whatever its logger is named
    in the pinned version; the provider sends below it, the SDK's own calls
    go through it); at debug that client's line shows."""
    out = io.StringIO()
    configure_logging("info", "json", stream=out)
    llm.add_text("one")
    provider = OpenAIProvider(ProviderSettings("p", "key-123456", llm.base_url, max_retries=0))
    try:
        await provider.complete(LLMRequest("fake-model", [ChatMessage.user("hi")]))
        http = provider._client_for_call().http
        await http.get(llm.base_url)
        assert _client_lines(out) == []
        configure_logging("debug", "json", stream=out)
        await http.get(llm.base_url)
        assert any("HTTP Request" in line["event"] for line in _client_lines(out))
    finally:
        await provider.aclose()


def test_a_clean_string_seen_before_a_secret_was_registered_is_masked_after() -> None:
    out = io.StringIO()
    configure_logging("info", "json", stream=out)
    value = "token=later-registered-value"
    structlog.get_logger("a").info("first", note="later-registered-value")
    register_secrets(["later-registered-value"])
    structlog.get_logger("a").info("second", note="later-registered-value", other=value)
    first, second = json_lines(out)
    assert first["note"] == "later-registered-value"
    assert second["note"] == MASK
    assert "later-registered-value" not in second["other"]


def test_reconfiguring_replaces_the_handler() -> None:
    first, second = io.StringIO(), io.StringIO()
    configure_logging("info", "json", stream=first)
    configure_logging("info", "json", stream=second)
    structlog.get_logger("a").info("once")
    assert first.getvalue() == ""
    assert len(json_lines(second)) == 1


def test_our_lines_and_library_records_are_the_same_shape_on_one_stream() -> None:
    """Ours skip stdlib logging (gateway.ops.logging `_LineWriter`) and still come
    out as a library's record does: same keys, in order, between its lines."""
    out = io.StringIO()
    configure_logging("info", "json", stream=out)
    structlog.contextvars.bind_contextvars(run_id="r-1")
    logging.getLogger("lib").info("before")
    structlog.get_logger("gateway.x").info("ours", n=1)
    logging.getLogger("lib").info("after")
    lines = json_lines(out)
    assert [line["event"] for line in lines] == ["before", "ours", "after"]
    assert list(lines[1]) == ["n", "event", "run_id", "logger", "level", "timestamp"]
    # (pytest's own handler may leave a `message` on a library's record)
    assert {"event", "run_id", "logger", "level", "timestamp"} <= set(lines[0])


def test_a_log_line_that_cannot_be_written_never_raises_into_the_caller(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = io.StringIO()
    configure_logging("info", "json", stream=out)
    out.close()  # a stream gone (a closed pipe, say)
    structlog.get_logger("a").info("lost")
    logging.getLogger("b").info("lost too")
    assert "log line not written" in capsys.readouterr().err  # said where it can be


def test_bad_level_or_format_is_rejected() -> None:
    with pytest.raises(ValueError, match="level"):
        configure_logging("chatty", "json", stream=io.StringIO())
    with pytest.raises(ValueError, match="format"):
        configure_logging("info", "xml", stream=io.StringIO())


API_KEY = "zq-9f3e7c1a5b2d8e4f6a0c"
APP_SECRET = "appsecret_K7mP2xQ9wL4nR8vT"
BOT_TOKEN = "7312984561:AAHn3kPq9ZxW2vLm8RtY5uJc1oEb4sDfGhK"
CREDENTIAL_FILE = '{"bot_token": "ilinkTOKEN_5b8c2e9f1a7d", "baseurl": "https://x"}'
SECRETS = (API_KEY, APP_SECRET, BOT_TOKEN, "ilinkTOKEN_5b8c2e9f1a7d")


class Holder:
    def __init__(self, value: str) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"Holder({self.value})"


def emit_everything(log: Any) -> int:
    """Log the registered secrets every way they can leak; returns the line count."""
    event_text = f"calling provider with {API_KEY}"
    log.info(event_text)  # the secret inside the event text itself
    log.info("request", detail=f"secret is {APP_SECRET}", nested={"list": [API_KEY, 1]})
    log.info("config", api_key=API_KEY, app_secret=APP_SECRET, token=BOT_TOKEN, count=5)
    log.info("headers", headers={"Authorization": "Bearer unregistered-xyz-123456"})
    log.info("free text", note="header was Authorization: Bearer unregistered-abc-987654")
    log.info("openai style", note="key sk-proj-unregistered0123456789 rejected")
    log.info("object", holder=Holder(APP_SECRET))
    log.info("credentials", contents=CREDENTIAL_FILE)
    log.info("url", url=f"https://api.telegram.org/bot{BOT_TOKEN}/getMe")
    log.info("query", url="https://qyapi/cgi-bin/gettoken?corpid=1&corpsecret=unregisteredQ")
    log.info("bot", url=f"https://api.telegram.org/bot{UNREGISTERED_BOT}/sendMessage")
    log.info("folded", note="ſecret=unregisteredF1 CREDENTİAL=unregisteredF2")  # re.I letters
    try:
        raise RuntimeError(f"provider said: invalid key {API_KEY}")
    except RuntimeError:
        log.exception("provider_failed")
    std = logging.getLogger("some.library")
    std.warning("retrying with token %s", BOT_TOKEN)
    try:
        raise ConnectionError(f"auth {APP_SECRET} refused")
    except ConnectionError:
        std.exception("library failure")
    return 15


UNREGISTERED_BOT = "5550001234:AAFq8ZxW2vLm8RtY5uJc1oEb4sDfGhKzz"  # no keyword around it
UNREGISTERED = (
    UNREGISTERED_BOT,
    "unregistered-xyz-123456",
    "unregistered-abc-987654",
    "sk-proj-unregistered0123456789",
    "unregisteredQ",
    "unregisteredF1",
    "unregisteredF2",
)


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_secrets_never_reach_the_output(fmt: str) -> None:
    out = TtyStream() if fmt == "console" else io.StringIO()
    configure_logging("info", fmt, stream=out)
    register_secrets([API_KEY, APP_SECRET, BOT_TOKEN, "ilinkTOKEN_5b8c2e9f1a7d", ""])

    expected_lines = emit_everything(structlog.get_logger("picobot.test"))

    text = out.getvalue()
    for secret in SECRETS + UNREGISTERED:
        assert secret not in text, secret
    assert MASK in text
    # Redaction keeps what is not secret, and keeps every line.
    assert "count" in text
    assert "provider_failed" in text
    assert "RuntimeError" in text
    assert "https://x" in text
    if fmt == "json":
        lines = json_lines(out)  # still valid JSON after redaction
        assert len(lines) == expected_lines
        config_line = next(line for line in lines if line["event"] == "config")
        assert config_line["api_key"] == MASK
        assert config_line["count"] == 5


def test_unregistered_values_under_plain_keys_are_kept() -> None:
    out = io.StringIO()
    configure_logging("info", "json", stream=out)
    register_secrets(["abc"])  # too short to be treated as a secret
    structlog.get_logger("a").info(
        "message", text="abc def", input_tokens=12, api_key="", path=Path("/var/lib/picobot")
    )
    (line,) = json_lines(out)
    assert line["path"] == "/var/lib/picobot"
    assert line["text"] == "abc def"
    assert line["input_tokens"] == 12
    assert line["api_key"] == ""  # an empty value shows it is missing, and leaks nothing


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_a_key_is_scrubbed_like_a_value_also_one_seen_clean_before(fmt: str) -> None:
    """The rendered line is checked again only for registered secrets: the
    event's keys are scrubbed with its values, patterns included."""
    out = TtyStream() if fmt == "console" else io.StringIO()
    configure_logging("info", fmt, stream=out)
    later = "later-registered-key-value"
    log = structlog.get_logger("a")
    log.info("first", **{f"seen_{later}": 1})
    register_secrets([API_KEY, later])
    log.info(
        "second",
        **{f"seen_{later}": 2, f"for_{API_KEY}": 3, "Bearer unregistered-key-123456": 4},
    )
    text = out.getvalue()
    _, second = text.splitlines()
    for secret in (later, API_KEY, "unregistered-key-123456"):
        assert secret not in second, secret
    assert "seen_" in second
    assert "for_" in second
    if fmt == "json":
        assert json.loads(second)[f"seen_{MASK}"] == 2
