"""Tool progress as the gateway passes it on: what a line may show, and when
events go out (live, batched once, or not at all)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from agent.messages import ToolCall
from agent.tools.base import ToolResult
from channels.base import Capabilities
from gateway.bus import ChannelEvent, EventKind, OutboundMessage, ToolStatus
from gateway.ops.logging import clear_secrets, register_secrets
from gateway.turns.tool_progress import ToolDisplay, ToolProgress, summarize_arguments, tool_display

SECRET = "zq-registered-secret-value-42"


@pytest.fixture(autouse=True)
def _secret() -> Iterator[None]:
    register_secrets([SECRET])
    yield
    clear_secrets()


class Sink:
    def __init__(self) -> None:
        self.events: list[ChannelEvent] = []

    def wake(self, channel: str) -> None: ...

    def handoff(self, message: OutboundMessage, row_id: int) -> None: ...

    async def notify(self, event: ChannelEvent) -> None:
        self.events.append(event)


BASE = ChannelEvent(EventKind.WORKING, "telegram", "42", "telegram:42", "run1", "", "42:7")


def call(n: int, **arguments: object) -> ToolCall:
    return ToolCall(f"call_{n}", "http_request", json.dumps(arguments))


def test_arguments_are_one_short_line_with_secrets_masked() -> None:
    assert summarize_arguments('{"path": "notes.md"}') == "path=notes.md"
    assert summarize_arguments('{"a": 1, "b": [1, 2], "c": null}') == "a=1, b=[1, 2], c=null"
    assert summarize_arguments('{"text": "two\\nlines"}') == "text=two lines"
    masked = summarize_arguments(
        json.dumps({"headers": {"Authorization": "Bearer abc.def"}, "api_key": "k-123456"})
    )
    assert masked == 'headers={"Authorization": "***"}, api_key=***'
    # a registered secret is masked before anything is cut: no half of it shows
    long = summarize_arguments(json.dumps({"body": "x" * 30 + SECRET + "y" * 30}))
    assert SECRET[:10] not in long
    assert long == "body=" + "x" * 30 + "***" + "y" * 6 + "…"
    assert len(summarize_arguments(json.dumps({f"k{i}": "v" * 30 for i in range(10)}))) == 100
    assert summarize_arguments("not json " + SECRET) == "not json ***"
    assert summarize_arguments("") == ""


@pytest.mark.parametrize(
    ("show", "capabilities", "display"),
    [
        (False, Capabilities(can_edit=True), ToolDisplay.OFF),
        (True, Capabilities(can_edit=True), ToolDisplay.LIVE),
        (True, Capabilities(), ToolDisplay.BATCHED),
        (False, Capabilities(tool_events=True), ToolDisplay.LIVE),
    ],
)
def test_the_display_follows_the_setting_and_the_channel(
    show: bool, capabilities: Capabilities, display: ToolDisplay
) -> None:
    assert tool_display(show, capabilities) is display


async def run_two(progress: ToolProgress) -> None:
    first, second = call(1, url="https://a"), call(2, url="https://b", token=SECRET)
    await progress.tool_started(first)
    await progress.tool_started(second)
    await progress.tool_finished(ToolResult(second, f"the secret is {SECRET}", ok=False), 0.25)
    await progress.tool_finished(ToolResult(first, "fine", ok=True), 1.5)
    await progress.flush()


async def test_live_sends_every_start_and_end_with_the_calls_so_far() -> None:
    sink = Sink()
    await run_two(ToolProgress(sink, BASE, ToolDisplay.LIVE))
    assert [e.kind for e in sink.events] == [EventKind.TOOL] * 4
    assert [(e.tool.call_id, e.tool.status) for e in sink.events if e.tool] == [
        ("call_1", ToolStatus.RUNNING),
        ("call_2", ToolStatus.RUNNING),
        ("call_2", ToolStatus.ERROR),
        ("call_1", ToolStatus.OK),
    ]
    last = sink.events[-1]
    assert [(c.call_id, c.status, c.secs) for c in last.tool_calls] == [
        ("call_1", ToolStatus.OK, 1.5),
        ("call_2", ToolStatus.ERROR, 0.25),
    ]
    assert last.tool_calls[1].summary == "url=https://b, token=***"
    assert (last.chat_id, last.run_id, last.reply_to_message_id) == ("42", "run1", "42:7")
    assert all(SECRET not in repr(e) for e in sink.events)  # results never travel


async def test_batched_sends_once_when_the_tool_work_is_over() -> None:
    sink = Sink()
    progress = ToolProgress(sink, BASE, ToolDisplay.BATCHED)
    await run_two(progress)
    await progress.flush()  # a second flush sends nothing more
    [event] = sink.events
    assert event.tool is None
    assert [c.status for c in event.tool_calls] == [ToolStatus.OK, ToolStatus.ERROR]


async def test_off_or_without_calls_nothing_is_sent() -> None:
    sink = Sink()
    await run_two(ToolProgress(sink, BASE, ToolDisplay.OFF))
    await ToolProgress(sink, BASE, ToolDisplay.BATCHED).flush()
    assert sink.events == []


def test_each_channel_gets_its_display_from_its_override_or_the_gateway() -> None:
    from channels.telegram import TelegramChannel
    from channels.websocket import WebSocketChannel
    from gateway.config.loading import parse_config
    from gateway.turns.chat_policy import build_chat_policies

    config, _ = parse_config(
        {
            "gateway": {"show_tool_results": True},
            "channels": {
                "websocket": {"show_tool_results": False},
                "telegram": {"enabled": True, "token": "x", "show_tool_results": False},
            },
        },
        {},
    )
    channels = [
        WebSocketChannel(config.channels.websocket, auth_token=None),
        TelegramChannel(config.channels.telegram),
    ]
    policies = build_chat_policies(config, channels)
    assert policies["websocket"].tools is ToolDisplay.LIVE  # its frames go out regardless
    assert policies["telegram"].tools is ToolDisplay.OFF
    on, _ = parse_config({"gateway": {"show_tool_results": True}}, {})
    assert build_chat_policies(on, channels[1:])["telegram"].tools is ToolDisplay.LIVE
