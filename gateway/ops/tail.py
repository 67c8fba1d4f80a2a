"""The log's last lines in memory, for the console's Logs view: a live tail
without a shell on the host.

`LogTail` is a step of the log pipeline (gateway.ops.logging), after
redaction, so it keeps what the log writes, secrets masked, for our events
and the libraries' records alike. When the log writes JSON lines it keeps
each line as written (`LogTail.rendered`, after the renderer: no work of its
own but an append); when the log writes console lines it keeps the event as
a JSON line of its own (`LogTail.__call__`, before the renderer: one orjson
dump). A line longer than `MAX_LINE_CHARS` is kept with its long fields cut
short. Each line has a sequence number, in a deque of the last `MAX_EVENTS`.
The work of reading (filters, parsing) is done by whoever reads, bounded by
the deque's size.

The sequence numbers only grow: a reader asks for the events after the last
one it saw (`read(after=...)`) and learns whether some were lost between
(`TailPage.gap`: pushed out of the deque, or past its `limit`).
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass
from typing import Any, Final

import orjson
from structlog.typing import EventDict, WrappedLogger

__all__ = [
    "LEVELS",
    "LOG_TAIL",
    "MAX_EVENTS",
    "MAX_LINE_CHARS",
    "MAX_READ",
    "LogTail",
    "TailEvent",
    "TailPage",
]

MAX_EVENTS: Final = 2_000
MAX_LINE_CHARS: Final = 4_096  # a longer event keeps its fields cut short
MAX_READ: Final = 500  # events one read returns at most
_CUT_MARK: Final = "…"
# the pipeline's own fields; the rest of an event are its fields
_OWN: Final = ("timestamp", "level", "event", "logger")

LEVELS: Final = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}
_INFO: Final = LEVELS["info"]
# a logger's method (structlog's; a stdlib record's level name) → its level
_METHOD_LEVELS: Final = {
    **LEVELS,
    "msg": _INFO,
    "warn": LEVELS["warning"],
    "err": LEVELS["error"],
    "exception": LEVELS["error"],
    "fatal": LEVELS["critical"],
}


@dataclass(frozen=True, slots=True)
class TailEvent:
    seq: int
    time: str | None  # ISO 8601, UTC, as the log writes it
    level: str
    event: str
    logger: str | None
    fields: dict[str, Any]
    cut: bool  # the line was over MAX_LINE_CHARS: long fields are cut short

    def as_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "time": self.time,
            "level": self.level,
            "event": self.event,
            "logger": self.logger,
            "fields": self.fields,
            "cut": self.cut,
        }


@dataclass(frozen=True, slots=True)
class TailPage:
    events: list[TailEvent]  # oldest first
    last: int  # the newest sequence number written: the next read's `after`
    gap: bool  # events after `after` that matched are not in `events`


class LogTail:
    """The last `capacity` lines of the log: a structlog processor before the
    renderer (`__call__`, an event) or after it (`rendered`, a JSON line)."""

    def __init__(self, capacity: int = MAX_EVENTS, line_chars: int = MAX_LINE_CHARS) -> None:
        self._events: deque[tuple[int, int, str, bool]] = deque(maxlen=capacity)
        self._lock = threading.Lock()  # a number and its append go together
        self._seq = 0
        self._line_chars = line_chars

    def __call__(self, _logger: WrappedLogger, method: str, event_dict: EventDict) -> EventDict:
        """Keep a (redacted) event; before a renderer that writes no JSON."""
        try:
            line = _dumped(event_dict)
            cut = len(line) > self._line_chars
            if cut:
                line = _cut(event_dict, self._line_chars)
        except Exception:  # the log line itself must never fail for the tail
            return event_dict
        self._keep(method, line, cut)
        return event_dict

    def rendered(self, _logger: WrappedLogger, method: str, line: Any) -> Any:
        """Keep a JSON line as the log writes it; after the JSON renderer."""
        if line.__class__ is str and len(line) <= self._line_chars:  # nearly every line
            level = _METHOD_LEVELS.get(method, _INFO)
            with self._lock:
                self._seq += 1
                self._events.append((self._seq, level, line, False))
            return line
        try:  # seldom: cut its fields
            text = _cut(orjson.loads(str(line)), self._line_chars)
        except Exception:  # not JSON after all; never the log line's problem
            return line
        self._keep(method, text, True)
        return line

    def _keep(self, method: str, line: str, cut: bool) -> None:
        level = _METHOD_LEVELS.get(method, _INFO)
        with self._lock:
            self._seq += 1
            self._events.append((self._seq, level, line, cut))

    def read(
        self, *, after: int = 0, level: str = "debug", text: str = "", limit: int = 200
    ) -> TailPage:
        """The newest `limit` events after `after` at `level` or above whose
        line holds `text` (any case), oldest first."""
        limit = max(1, min(limit, MAX_READ))
        least = LEVELS.get(level, 0)
        needle = text.casefold()
        with self._lock:
            events = list(self._events)
            last = self._seq
        matched: list[tuple[int, str, bool]] = []
        for seq, lvl, line, cut in reversed(events):  # newest first, up to one past `limit`
            if seq <= after:
                break
            if lvl < least or (needle and needle not in line.casefold()):
                continue
            matched.append((seq, line, cut))
            if len(matched) > limit:
                break
        lost = bool(events) and events[0][0] > after + 1  # pushed out since `after`
        gap = after > 0 and (len(matched) > limit or lost)
        return TailPage([_parsed(*m) for m in reversed(matched[:limit])], last, gap)

    def clear(self) -> None:
        """Forget every event (the numbers go on)."""
        with self._lock:
            self._events.clear()


def _dumped(event: Any) -> str:
    try:  # redaction has left plain JSON values (a thing it does not know, as its repr)
        return orjson.dumps(event).decode()
    except TypeError:
        pass
    try:  # a key that is not a string, another object
        return orjson.dumps(event, default=repr, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:  # an integer beyond 64 bits, a lone surrogate
        return json.dumps(event, default=repr, ensure_ascii=False)


def _cut(event: Any, line_chars: int) -> str:
    """The event with every long field cut to a share of `line_chars` (a
    container as its JSON text); only the pipeline's fields if still over."""
    if not isinstance(event, dict):
        event = {"event": str(event)}
    share = max(40, (line_chars - 200) // max(1, len(event)))
    shortened: dict[str, Any] = {}
    for key, value in event.items():
        text = value if isinstance(value, str) else None
        if isinstance(value, dict | list | tuple):
            text = _dumped(value)
        if text is not None and len(text) > share:
            value = text[:share] + _CUT_MARK
        shortened[str(key)[:share]] = value
    line = _dumped(shortened)
    if len(line) <= line_chars:
        return line
    for chars in (line_chars // 8, 40):  # the second: text that JSON escapes at length
        own = {k: str(event[k])[:chars] for k in _OWN if k in event}
        note = f"{len(event) - len(own)} field(s) left out{_CUT_MARK}"
        line = _dumped({**own, "fields": note})
        if len(line) <= line_chars:
            break
    return line


def _small_int(text: str) -> int | str:
    """An integer JSON can carry everywhere; a longer one as its digits."""
    return int(text) if len(text) < 16 else text


def _parsed(seq: int, line: str, cut: bool) -> TailEvent:
    try:
        fields = orjson.loads(line)
    except orjson.JSONDecodeError:  # json's fallback wrote NaN or Infinity: as text
        fields = json.loads(line, parse_constant=str, parse_int=_small_int)
    time, level, event, logger = (fields.pop(k, None) for k in _OWN)
    return TailEvent(
        seq=seq,
        time=None if time is None else str(time),
        level=str(level or "info"),
        event=str(event) if event is not None else "",
        logger=None if logger is None else str(logger),
        fields=fields,
        cut=cut,
    )


LOG_TAIL: Final = LogTail()  # the process's: configure_logging puts it in the pipeline
