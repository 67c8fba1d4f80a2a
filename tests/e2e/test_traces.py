"""OpenTelemetry traces end to end: a gateway whose `observability.otlp_endpoint`
is a fake collector (tests/fakes/otlp_collector.py, the official protobuf
types) sends one trace per inbound message, flushed when it stops; with
tracing off nothing of the SDK is imported and no log line has a trace id."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import structlog
from structlog.testing import LogCapture

from tests.fakes.openai_server import FakeOpenAI, Reply, ScriptedToolCall
from tests.fakes.otlp_collector import FakeCollector, ReceivedSpan
from tests.support import make_config, running_gateway, ws_client

REPO = Path(__file__).resolve().parents[2]
ROOT, CLIENT, CONSUMER = "message", 3, 5  # span names and OTLP kinds


@contextmanager
def logged() -> Iterator[list[dict[str, Any]]]:
    """Every log line while the block runs, with the context bound to it."""
    capture = LogCapture()
    old = structlog.get_config()
    structlog.configure(processors=[structlog.contextvars.merge_contextvars, capture])
    try:
        yield capture.entries
    finally:
        structlog.configure(**old)


def one(spans: list[ReceivedSpan], name: str) -> ReceivedSpan:
    [span] = [s for s in spans if s.name == name]
    return span


def children(spans: list[ReceivedSpan], parent: ReceivedSpan) -> list[ReceivedSpan]:
    return [s for s in spans if s.parent_id == parent.span_id]


async def test_each_message_is_one_trace_from_its_inbox_row_to_its_send(
    home: Path, llm: FakeOpenAI
) -> None:
    llm.add_text("hello there", usage=(120, 7))
    calc = ScriptedToolCall("calculator", {"expression": "6*7"}, call_id="call_calc_1")
    llm.add_reply(Reply(tool_calls=(calc,), usage=(200, 15)))
    llm.add_text("6 times 7 is 42.", usage=(260, 9))
    question = "what is 6*7? use the calculator"
    async with FakeCollector() as collector:
        loaded = make_config(home, llm.base_url, observability={"otlp_endpoint": collector.url})
        with logged() as lines:
            async with running_gateway(loaded) as gw, ws_client(gw) as client:
                assert await client.ask("hi") == "hello there"
                assert await client.ask(question) == "6 times 7 is 42."
                status = await client.ask("/status")
        # stopped: every span was exported on the way out, nothing to wait for

    traces = collector.traces()
    assert len(traces) == 3  # "hi", the question, /status
    roots = {tid: [s for s in spans if not s.parent_id] for tid, spans in traces.items()}
    assert all(len(r) == 1 and r[0].name == ROOT for r in roots.values())
    by_turns = sorted(
        (t for t in traces.values() if any(s.name == "turn" for s in t)),
        key=lambda t: one(t, ROOT).start_ns,
    )
    assert len(by_turns) == 2
    billed = [usage for _, usage in llm.billed]
    calls = iter(zip(billed, llm.request_headers, strict=True))

    for spans, model_calls in zip(by_turns, (1, 2), strict=True):
        root, turn = one(spans, ROOT), one(spans, "turn")
        assert root.kind == CONSUMER
        assert root.resource["service.name"] == "picobot"
        assert root.attributes["picobot.channel"] == "websocket"
        assert root.attributes["picobot.chat_id"] == "chat-1"
        assert turn.parent_id == root.span_id
        assert turn.attributes["picobot.turn.ok"] is True
        chats = sorted((s for s in spans if s.name == "chat fake-model"), key=lambda s: s.start_ns)
        assert len(chats) == model_calls
        assert all(s.parent_id == turn.span_id and s.kind == CLIENT for s in chats)
        for span in chats:
            usage, headers = next(calls)
            a = span.attributes
            assert a["gen_ai.operation.name"] == "chat"
            assert a["gen_ai.system"] == "openai"
            assert a["gen_ai.request.model"] == a["gen_ai.response.model"] == "fake-model"
            assert a["gen_ai.usage.input_tokens"] == usage["prompt_tokens"]
            assert a["gen_ai.usage.output_tokens"] == usage["completion_tokens"]
            assert a["gen_ai.usage.cache_read.input_tokens"] == 0
            assert a["gen_ai.usage.cache_creation.input_tokens"] == 0
            # the model call's context went out on the provider's request
            version, trace_id, span_id, flags = headers["traceparent"].split("-")
            assert (version, trace_id, span_id) == ("00", span.trace_id, span.span_id)
            assert int(flags, 16) & 1  # sampled
        [send] = [s for s in spans if s.name == "send"]
        assert send.parent_id == root.span_id
        assert send.attributes["picobot.channel"] == "websocket"
        assert send.attributes["picobot.chat_id"] == "chat-1"
        assert root.end_ns >= send.end_ns  # the root lasts until the reply went
        assert root.start_ns <= turn.start_ns

    first, second = by_turns
    assert [
        s.attributes["gen_ai.usage.input_tokens"] for s in first if s.name.startswith("chat")
    ] == [120]
    finishes = [
        s.attributes["gen_ai.response.finish_reasons"]
        for s in sorted(second, key=lambda s: s.start_ns)
        if s.name.startswith("chat")
    ]
    assert finishes == [["tool_calls"], ["stop"]]
    assert not [s for s in first if s.name.startswith("execute_tool")]
    tool = one(second, "execute_tool calculator")
    assert tool.parent_id == one(second, "turn").span_id
    assert tool.attributes == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "calculator",
        "gen_ai.tool.call.id": "call_calc_1",
    }

    # /status: a trace of its own (no turn), showing the last turn's trace
    [command] = [t for t in traces.values() if not any(s.name == "turn" for s in t)]
    assert sorted(s.name for s in command) == ["message", "send"]
    assert f"trace: {by_turns[1][0].trace_id}" in status

    # neither the message's text nor the tool's arguments are in any span
    for span in collector.spans:
        for value in span.attributes.values():
            assert "6*7" not in str(value)
            assert "hello" not in str(value)

    # every log line of a turn carries its trace id
    done = [line for line in lines if line["event"] == "turn_done"]
    assert [line["trace_id"] for line in done] == [t[0].trace_id for t in by_turns]


async def test_a_collector_that_does_not_answer_does_not_hold_up_the_stop(
    home: Path, llm: FakeOpenAI
) -> None:
    """The export at stop waits at most what is left of the shutdown budget
    (2 s here), not the exporter's own 10 s timeout."""
    async with FakeCollector() as collector:
        collector.hold()
        loaded = make_config(
            home,
            llm.base_url,
            observability={"otlp_endpoint": collector.url},
            gateway={"shutdown_timeout_secs": 2},
        )
        async with running_gateway(loaded) as gw, ws_client(gw) as client:
            await client.ask("hi")
            stopping = time.monotonic()
        took = time.monotonic() - stopping
        assert collector.exports == 1  # it was sent the spans, and never answered
        collector.release()
    assert took < 4.0, took


_OFF_CHILD = """
import asyncio, json, sys
from pathlib import Path
import structlog
from structlog.testing import LogCapture
from tests.support import make_config, running_gateway, ws_client

async def main(home: str, llm_url: str) -> None:
    capture = LogCapture()
    structlog.configure(processors=[structlog.contextvars.merge_contextvars, capture])
    async with running_gateway(make_config(Path(home), llm_url)) as gw, ws_client(gw) as client:
        reply = await client.ask("hi")
    print(json.dumps({
        "reply": reply,
        "otel": sorted(m for m in sys.modules if m.startswith("opentelemetry.sdk")),
        "ops": sorted(m for m in sys.modules if m.startswith("gateway.ops.")),
        "events": [line["event"] for line in capture.entries],
        "traced": [line["event"] for line in capture.entries if "trace_id" in line],
    }))

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


@pytest.mark.slow
async def test_with_tracing_off_no_sdk_is_imported_and_no_line_has_a_trace_id(
    home: Path, llm: FakeOpenAI
) -> None:
    """A whole turn in a fresh interpreter (this one has the SDK loaded by
    the other tests): its modules and its log lines afterwards."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _OFF_CHILD,
        str(home),
        llm.base_url,
        cwd=REPO,
        stdout=subprocess.PIPE,
        env={"PATH": "/usr/bin:/bin", "NO_PROXY": "127.0.0.1,localhost"},
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0
    seen = json.loads(out.decode().strip().splitlines()[-1])
    assert seen["reply"] == "echo: hi"
    assert "gateway.ops.tracing" in seen["ops"]  # the facade is there …
    assert "gateway.ops.otel" not in seen["ops"]  # … the SDK behind it is not
    assert seen["otel"] == []
    assert "turn_done" in seen["events"]
    assert seen["traced"] == []
