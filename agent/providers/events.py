"""A streamed response read as server-sent events of plain JSON: the
events split from the body's bytes as they come (`SseEvents`), each event's
data read by orjson (`event_json`), the text deltas of one network read
passed on as one (`DeltaBatch`), and the loop that hands each event to a
provider until its reply is whole (`read_events`). Both SDK providers read
their streams here (agent.providers.route sends the requests)."""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable

import orjson

from agent.messages import valid_unicode
from agent.providers.base import DeltaSink
from agent.providers.route import Streaming
from agent.providers.sdk import drain_briefly

__all__ = ["DeltaBatch", "SseEvent", "SseEvents", "event_json", "read_events"]

# (event name, data): the name is "" where the event has none
SseEvent = tuple[str, str]


class SseEvents:
    """Each server-sent event (its name and data), from the stream's bytes as
    they come. Lines end with LF, CRLF or CR (a CR that ends a piece waits for
    the next, which may begin with its LF) and are UTF-8, as the format
    requires; httpx's `aiter_lines` would read the charset from the headers
    on every call and decode through two more layers. An event with no data
    (a keep-alive's bare `data:`) is not one, as the format says."""

    def __init__(self) -> None:
        self._partial: list[bytes] = []  # the line so far, in pieces
        self._cr = b""  # a CR that ended the last piece
        self._data: list[str] = []
        self._name = ""

    def feed(self, piece: bytes) -> list[SseEvent]:
        text = self._cr + piece  # only the new bytes are scanned: a long line costs once
        self._cr = b"\r" if text.endswith(b"\r") else b""
        lines = text[: len(text) - len(self._cr)].replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        parts = lines.split(b"\n")
        if len(parts) == 1:
            self._partial.append(parts[0])
            return []
        parts[0] = b"".join([*self._partial, parts[0]])
        self._partial = [parts.pop()]
        return self._take(parts)

    def end(self) -> list[SseEvent]:
        """What an unterminated last event carried."""
        rest = b"".join(self._partial)
        self._partial, self._cr = [], b""
        return self._take([rest, b""] if rest else [b""])

    def _take(self, lines: list[bytes]) -> list[SseEvent]:
        events: list[SseEvent] = []
        for raw in lines:
            if raw.startswith(b"data:"):
                self._data.append(raw[5:].removeprefix(b" ").decode(errors="replace"))
            elif raw.startswith(b"event:"):
                self._name = raw[6:].strip().decode(errors="replace")
            elif not raw:  # an empty line ends the event
                data = "\n".join(self._data)
                if data:
                    events.append((self._name, data))
                self._data.clear()
                self._name = ""
        return events


def event_json(data: str) -> object:
    """An event's data as JSON. A stream has an event per token, and orjson
    reads one in about a third of json's time; what orjson refuses and json
    takes (`NaN`, a lone surrogate escape) is read by json, as before. (One
    difference: an integer beyond 64 bits comes out as a float.)"""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


class DeltaBatch:
    """A stream's text deltas, passed on once per network read: pieces that
    came in one read reach the chat as one delta, as they came together (a
    whole short reply is one piece, not a delta per token of it). Each is
    valid Unicode (`valid_unicode`): the first half of a surrogate pair that
    ends a read waits for its other half, in the next."""

    def __init__(self, sink: DeltaSink) -> None:
        self._sink = sink
        self._pending: list[str] = []

    async def __call__(self, text: str) -> None:  # the assembler's delta sink
        self._pending.append(text)

    async def flush(self, *, last: bool = True) -> None:
        """`last`: no more text comes (the end, or an error event), so none waits.
        (A read that fails drops a half that waited: the call failed.)"""
        if not self._pending:
            return
        text = "".join(self._pending)
        self._pending.clear()
        if not last and text and "\ud800" <= text[-1] <= "\udbff":
            self._pending.append(text[-1])
            text = text[:-1]
        if text:
            await self._sink(valid_unicode(text))


async def read_events(
    response: Streaming,
    dispatch: Callable[[str, str], Awaitable[bool]],
    deltas: DeltaBatch | None = None,
) -> bool:
    """Hand each event (name, data) of a streamed `response` to `dispatch`
    until it says the reply is whole (True); then read the body's end,
    briefly (`drain_briefly`), so the connection can be reused. Nothing after
    that event counts. False: the body ended first. `deltas` are flushed after
    each read, at the end, and before an event's error propagates (what came
    before it was shown). The response is released (its connection closed if
    the body was not read to its end)."""
    flush = deltas.flush if deltas is not None else _nothing
    after_read = functools.partial(flush, last=False)

    async def whole(name: str, data: str) -> bool:
        try:
            done = await dispatch(name, data)
        except Exception:
            await flush()
            raise
        if done:
            await flush()
        return done

    try:
        pieces = response.pieces
        events = SseEvents()
        async for piece in pieces:
            for name, data in events.feed(piece):
                if await whole(name, data):
                    if not response.ended():  # mostly the end came with the event
                        await drain_briefly(pieces)
                    return True
            await after_read()
        for name, data in events.end():
            if await whole(name, data):
                return True
        await flush()
        return False
    finally:
        await response.release()


async def _nothing(*, last: bool = True) -> None:
    pass
