"""The log's tail in memory (gateway.ops.tail): bounded in events and in a
line's size, read after a cursor with level and text filters, fed by the log
pipeline after redaction — the same events, secrets masked, that the log
writes as JSON lines or console lines."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import orjson
import pytest
import structlog

from gateway.ops.logging import MASK, clear_secrets, configure_logging, register_secrets
from gateway.ops.tail import LOG_TAIL, MAX_READ, LogTail
from tests.support import logging_restored

SECRET = "planted-Secret-4f9a1c77"


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    with logging_restored():
        yield
    clear_secrets()


def _event(event: str, level: str = "info", **fields: object) -> dict[str, object]:
    return {"event": event, "level": level, "timestamp": "2026-01-02T03:04:05Z", **fields}


def _feed(tail: LogTail, *events: dict[str, object]) -> None:
    for event in events:
        tail(None, str(event["level"]), dict(event))


def test_the_tail_keeps_the_last_events_with_growing_numbers() -> None:
    tail = LogTail(capacity=5)
    _feed(tail, *(_event(f"e{i}", n=i) for i in range(1, 13)))

    page = tail.read()
    assert [e.seq for e in page.events] == [8, 9, 10, 11, 12]
    assert [e.event for e in page.events] == ["e8", "e9", "e10", "e11", "e12"]
    assert [e.fields for e in page.events] == [{"n": i} for i in range(8, 13)]
    assert page.events[0].time == "2026-01-02T03:04:05Z"
    assert page.last == 12
    assert not page.gap  # a first read has nothing to miss

    # a reader that last saw 3 lost 4..7: pushed out
    assert tail.read(after=3).gap
    assert not tail.read(after=7).gap


def test_reading_after_a_cursor_gives_only_what_is_new() -> None:
    tail = LogTail()
    _feed(tail, _event("one"), _event("two"))
    first = tail.read()
    assert [e.event for e in first.events] == ["one", "two"]

    again = tail.read(after=first.last)
    assert (again.events, again.last, again.gap) == ([], 2, False)

    _feed(tail, _event("three"))
    new = tail.read(after=first.last)
    assert [(e.seq, e.event) for e in new.events] == [(3, "three")]


def test_a_read_is_bounded_and_says_what_it_left_out() -> None:
    tail = LogTail(capacity=2_000)
    _feed(tail, *(_event("line", i=i) for i in range(1_500)))

    page = tail.read(limit=10**9)
    assert len(page.events) == MAX_READ
    assert page.events[-1].fields == {"i": 1_499}  # the newest

    small = tail.read(after=100, limit=10)
    assert [e.seq for e in small.events] == list(range(1_491, 1_501))
    assert small.gap  # 101..1490 matched too


def test_level_and_text_filters() -> None:
    tail = LogTail()
    _feed(
        tail,
        _event("turn_started", "debug", chat="alpha"),
        _event("turn_done", "info", chat="alpha"),
        _event("send_retry", "warning", chat="Beta", reason="Timeout talking to Telegram"),
        _event("send_failed", "error", chat="beta"),
        _event("crashed", "critical"),
    )

    def events(**kw: object) -> list[str]:
        return [e.event for e in tail.read(**kw).events]  # type: ignore[arg-type]

    assert events() == ["turn_started", "turn_done", "send_retry", "send_failed", "crashed"]
    assert events(level="info") == ["turn_done", "send_retry", "send_failed", "crashed"]
    assert events(level="warning") == ["send_retry", "send_failed", "crashed"]
    assert events(level="error") == ["send_failed", "crashed"]
    assert events(text="BETA") == ["send_retry", "send_failed"]  # any case, in the fields
    assert events(text="timeout talking") == ["send_retry"]
    assert events(text="beta", level="error") == ["send_failed"]
    assert events(text="turn_") == ["turn_started", "turn_done"]  # the event's name
    assert events(text="nowhere") == []


@pytest.mark.parametrize("entry", ["event", "json line"])
def test_a_long_line_is_cut_to_the_limit(entry: str) -> None:
    """Whether the tail gets the event (console logs) or the JSON line
    written (JSON logs)."""
    tail = LogTail(line_chars=1_024)

    def feed(event: dict[str, object]) -> None:
        if entry == "event":
            _feed(tail, event)
        else:
            tail.rendered(None, str(event["level"]), json.dumps(event))

    feed(_event("big", body="x" * 100_000, nested={"rows": ["y" * 500] * 50}, count=7))
    feed(_event("small", note="short"))

    big, small = tail.read().events
    assert big.cut
    assert not small.cut
    assert big.event == "big"
    assert big.level == "info"
    assert big.fields["count"] == 7
    assert big.fields["body"].startswith("xxx")
    assert big.fields["body"].endswith("…")
    assert len(big.fields["body"]) < 1_024
    assert isinstance(big.fields["nested"], str)
    assert big.fields["nested"].endswith("…")
    assert small.fields == {"note": "short"}
    stored = [line for _, _, line, _ in tail._events]
    assert all(len(line) <= 1_024 for line in stored)

    # so many fields that even cut they are over: the pipeline's own fields stay
    feed(_event("wide", "warning", **{f"field_{i}": "z" * 200 for i in range(200)}))
    wide = tail.read(text="wide").events[0]
    assert (wide.event, wide.level, wide.cut) == ("wide", "warning", True)
    assert "left out" in wide.fields["fields"]
    assert len(tail._events[-1][2]) <= 1_024


def test_values_orjson_refuses_still_make_a_line_a_reader_can_send() -> None:
    tail = LogTail()
    _feed(tail, _event("odd", big=10**30, ratio=float("nan"), k={3: "an int key"}))
    (odd,) = tail.read().events
    assert odd.fields == {"big": str(10**30), "ratio": "NaN", "k": {"3": "an int key"}}
    assert orjson.loads(orjson.dumps(odd.as_dict()))["fields"] == odd.fields


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_the_pipeline_feeds_the_tail_what_the_log_writes_secrets_masked(fmt: str) -> None:
    out, tail = io.StringIO(), LogTail()
    configure_logging("info", fmt, stream=out, tail=tail)
    register_secrets([SECRET])
    log = structlog.get_logger("picobot.test")

    log.debug("too_quiet")  # below the level: neither the log nor the tail
    log.info("provider_called", note=f"used {SECRET} here", api_key="sk-live-0123456789abcdef")
    logging.getLogger("some.library").warning("library says %s", SECRET)
    try:
        raise RuntimeError(f"failed with {SECRET}")
    except RuntimeError:
        log.exception("turn_failed", chat="c1")

    written = out.getvalue()
    events = tail.read().events
    assert [e.event for e in events] == ["provider_called", f"library says {MASK}", "turn_failed"]
    assert [e.level for e in events] == ["info", "warning", "error"]
    assert [e.logger for e in events] == ["picobot.test", "some.library", "picobot.test"]
    shown = json.dumps([e.as_dict() for e in events])
    assert SECRET not in shown
    assert SECRET not in written
    assert "sk-live-0123456789abcdef" not in shown
    first = events[0].fields
    assert first == {"note": f"used {MASK} here", "api_key": MASK}
    assert "RuntimeError" in events[2].fields["exception"]
    assert MASK in events[2].fields["exception"]
    if fmt == "json":  # the very fields of the lines written
        lines = [json.loads(line) for line in written.splitlines()]
        assert [
            {k: v for k, v in line.items() if k not in ("timestamp", "level", "event", "logger")}
            for line in lines
        ] == [e.fields for e in events]
        assert [line["timestamp"] for line in lines] == [e.time for e in events]


def test_the_process_tail_is_the_default_and_can_be_left_out() -> None:
    configure_logging("info", "json", stream=io.StringIO())
    structlog.get_logger("picobot.test").info("tail_probe", marker="default-7c1e")
    assert [e.event for e in LOG_TAIL.read(text="default-7c1e").events] == ["tail_probe"]

    configure_logging("info", "json", stream=io.StringIO(), tail=None)
    structlog.get_logger("picobot.test").info("tail_probe", marker="none-2b9d")
    assert LOG_TAIL.read(text="none-2b9d").events == []
