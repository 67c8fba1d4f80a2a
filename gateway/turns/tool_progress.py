"""Tool calls shown in the chat while a turn runs (`gateway.show_tool_results`).

A chat sees one short line per call — the tool's name, its arguments on one
line (masked as log lines are), ok/error and the duration — never the result.
Where the channel can edit a message, or its protocol carries tool events
(`Capabilities.tool_events`, the WebSocket), every start and end goes out as a
TOOL event with the turn's calls so far, and the channel keeps one progress
message per turn up to date. Elsewhere the turn's calls go out once, in one
TOOL event, when its tool work is over: at most one progress message a turn.

The events are best effort (`ReplySink.notify`) and never stored: the progress
message may be lost or late, the reply is untouched and stays the durable
outbox row it always was.
"""

from __future__ import annotations

import dataclasses
import json
from enum import StrEnum
from typing import Any

from agent.messages import ToolCall
from agent.tools.base import ToolResult
from channels.base import Capabilities
from gateway.bus import ChannelEvent, EventKind, ToolActivity, ToolStatus
from gateway.ops.logging import redact_data, redact_text
from gateway.work import ReplySink

__all__ = ["ToolDisplay", "ToolProgress", "summarize_arguments", "tool_display"]

_VALUE_MAX = 40  # characters of one argument's value
_SUMMARY_MAX = 100
_NAME_MAX = 64


class ToolDisplay(StrEnum):
    OFF = "off"
    LIVE = "live"  # every start and end, for a message edited in place
    BATCHED = "batched"  # once, when the turn's tool work is over


def tool_display(show: bool, capabilities: Capabilities) -> ToolDisplay:
    if capabilities.tool_events:
        return ToolDisplay.LIVE  # its clients decide what to show
    if not show:
        return ToolDisplay.OFF
    return ToolDisplay.LIVE if capabilities.can_edit else ToolDisplay.BATCHED


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return _cut(" ".join(text.split()), _VALUE_MAX)


def summarize_arguments(arguments: str) -> str:
    """The call's arguments on one short line. Everything is masked before it
    is cut: a secret cut in half would no longer be recognised."""
    try:
        raw = json.loads(arguments or "{}")
    except (ValueError, RecursionError):  # not JSON; nested too deeply to read
        raw = arguments
    data = redact_data(raw)
    if isinstance(data, dict):
        text = ", ".join(f"{k}={_value(v)}" for k, v in data.items())
    else:
        text = _value(data)
    return _cut(redact_text(text), _SUMMARY_MAX)


class ToolProgress:
    """One turn's tool calls, passed on to its chat as `display` says (a
    ToolCallWatcher: approved calls that run before the turn report to it too)."""

    def __init__(self, sink: ReplySink, event: ChannelEvent, display: ToolDisplay) -> None:
        self.sink = sink
        self.event = dataclasses.replace(event, kind=EventKind.TOOL, text="")
        self.display = display
        self._calls: dict[str, ToolActivity] = {}  # by call id, in call order
        self._flushed = False

    async def tool_started(self, call: ToolCall) -> None:
        if self.display is ToolDisplay.OFF:
            return
        name = _cut(redact_text(" ".join(call.name.split())), _NAME_MAX)
        await self._update(ToolActivity(call.id, name, summarize_arguments(call.arguments)))

    async def tool_finished(self, result: ToolResult, secs: float) -> None:
        known = self._calls.get(result.call.id)
        if known is None:
            return
        status = ToolStatus.OK if result.ok else ToolStatus.ERROR
        await self._update(dataclasses.replace(known, status=status, secs=round(secs, 3)))

    async def flush(self) -> None:
        """The one progress message of a channel that cannot edit."""
        if self.display is not ToolDisplay.BATCHED or self._flushed or not self._calls:
            return
        self._flushed = True
        await self.sink.notify(
            dataclasses.replace(self.event, tool_calls=tuple(self._calls.values()))
        )

    async def _update(self, activity: ToolActivity) -> None:
        self._calls[activity.call_id] = activity
        if self.display is ToolDisplay.LIVE:
            await self.sink.notify(
                dataclasses.replace(
                    self.event, tool=activity, tool_calls=tuple(self._calls.values())
                )
            )
