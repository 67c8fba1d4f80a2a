"""Log pipeline: structlog for our code and the stdlib root logger for libraries.

Every line — ours from structlog, a library's record from `logging` — goes
through the same steps: context variables merged (channel, session_id, run_id
bound with `structlog.contextvars.bind_contextvars` by the pipeline), level
and logger name added, exceptions rendered to text, secrets redacted, then
rendered as JSON lines or, on a TTY, as human-readable lines, on the one
stream of the root logger's handler. A library's record gets there through
the handler's `ProcessorFormatter`; ours skip stdlib logging and are written
to that stream under the handler's lock (`_LineWriter`).

Redaction runs on the structured event: values of secret-looking keys masked,
registered secret strings and token patterns replaced in every key and every
string, objects rendered with `repr` first so their text is scrubbed too. What
the renderer adds to that is punctuation, numbers and the pipeline's own
fields (time, level, logger name), so the rendered line is only checked once
more for the registered secrets, as a last guard. This module must never log,
store or return a registered secret.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import json
import logging
import os
import re
import sys
import threading
from collections.abc import Iterable, Mapping
from typing import Any, Final, TextIO

import orjson
import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

from gateway.ops.malformed_requests import SERVER_LOGGER, MalformedRequestFilter
from gateway.ops.tail import LOG_TAIL, LogTail

__all__ = [
    "MASK",
    "MIN_SECRET_LENGTH",
    "clear_secrets",
    "configure_logging",
    "redact_data",
    "redact_event",
    "redact_text",
    "register_secrets",
]

MASK: Final = "***"
# Shorter strings are not treated as secrets: replacing every "abc" in every
# line would make logs unreadable and such a value protects nothing anyway.
MIN_SECRET_LENGTH: Final = 6

_LEVELS: Final = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}
_SECRET_KEY = re.compile(r"key|token|secret|passw|authori[sz]ation|credential|cookie", re.I)
_NAME = r"[\w.-]*(?:key|token|secret|passw\w*|authori[sz]ation|credential)[\w.-]*"
# Patterns that carry a credential whatever the key: Authorization headers,
# OpenAI-style keys, Telegram bot tokens (they appear in Bot API URLs),
# `name=value` query parameters and quoted `"name": "value"` pairs.
_PATTERNS: Final[tuple[tuple[re.Pattern[str], str], ...]] = (
    (re.compile(r"\b(Bearer|Basic)\s+[A-Za-z0-9\-._~+/]+=*", re.I), rf"\1 {MASK}"),
    (re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}"), f"sk-{MASK}"),
    (re.compile(r"(?<!\d)\d{5,}:[A-Za-z0-9_\-]{30,}"), MASK),
)
_PAIR_PATTERNS: Final[tuple[tuple[re.Pattern[str], str], ...]] = (
    (re.compile(rf"\b({_NAME})=(?!\d+\b)[^&\s\"',;\\]+", re.I), rf"\1={MASK}"),
    (
        re.compile(rf"([\"'])({_NAME})\1(\s*:\s*)([\"'])(?:(?!\4).)*\4", re.I),
        rf"\1\2\1\3\4{MASK}\4",
    ),
)
# Every pattern above needs one of these words (in any case) or, for a bot
# token, a colon and 30 token characters: a string without them is only
# checked for registered secrets (most of what is logged). Substring tests
# and a pattern that starts with a literal cost a fraction of one
# case-insensitive alternation tried at every position of every line.
_HINT_WORDS: Final = (
    "bearer", "basic", "sk-", "key", "token", "secret", "passw", "authori", "credential",
)  # fmt: skip
_HINT_TOKEN: Final = re.compile(r":[A-Za-z0-9_\-]{30}")
# The patterns' re.I also matches "ſ" to s, and "ı" and "İ" to i, which
# str.lower() does not turn into those letters: a text with one of them is
# checked the slow way.
_HINT_FOLDS: Final = ("ſ", "ı", "İ")
_HINT_FOLDED: Final = re.compile("|".join(_HINT_WORDS), re.I)


def _hinted(text: str) -> bool:
    """Whether a credential pattern could match `text` (false positives are fine)."""
    lowered = text.lower()
    if any(word in lowered for word in _HINT_WORDS) or _HINT_TOKEN.search(text) is not None:
        return True
    return any(c in text for c in _HINT_FOLDS) and _HINT_FOLDED.search(text) is not None


# Short strings found clean, so that the channel names, event names and ids
# logged again and again cost a set lookup (emptied when a secret is added)
_CLEAN: Final[set[str]] = set()
_CLEAN_MAX_CHARS: Final = 200
_CLEAN_CAPACITY: Final = 4_096
# added by the pipeline itself from values that are never secret
_OWN_KEYS: Final = frozenset({"timestamp", "level", "logger"})
_OUR_HANDLER: Final = "_picobot_handler"
# Libraries that log every HTTP request at INFO (the LLM SDKs use httpx; the MCP
# SDK logs session ids and stream reconnects): shown at debug only, so that
# info stays one line per turn.
# The SDKs' httpx is vendored as `httpx2` (with `httpcore2`) in the versions
# the lock pins: naming only `httpx` let a line per LLM call through.
_CHATTY_LOGGERS: Final = (
    "httpx",
    "httpx2",
    "httpcore",
    "httpcore2",
    "openai",
    "anthropic",
    "mcp",
)
# Held at warning even at debug: aiosqlite writes two lines per storage job,
# each the repr of the job's function and arguments; a turn's job carries the
# chat's whole cached history, so a debug log grew with every turn by the
# chat's length, message texts included.
_QUIET_LOGGERS: Final = ("aiosqlite",)


class _SecretRegistry:
    """The secret strings of this process, matched as one alternation."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        self._plain: re.Pattern[str] | None = None  # the ones a JSON dump leaves intact

    def add(self, values: Iterable[str]) -> None:
        with self._lock:
            for value in values:
                if isinstance(value, str) and len(value.strip()) >= MIN_SECRET_LENGTH:
                    self._values.add(value)
            self._pattern = _alternation(self._values)
            self._plain = _alternation(v for v in self._values if json.dumps(v)[1:-1] == v)
            _CLEAN.clear()  # what was clean may hold a new secret
            _KEYS.clear()

    def clear(self) -> None:
        with self._lock:
            self._values.clear()
            self._pattern = self._plain = None
            _CLEAN.clear()
            _KEYS.clear()

    def scrub(self, text: str, *, rendered: bool = False) -> str:
        pattern = self._plain if rendered else self._pattern
        return text if pattern is None else pattern.sub(MASK, text)


def _alternation(values: Iterable[str]) -> re.Pattern[str] | None:
    ordered = sorted(set(values), key=len, reverse=True)  # longest first: no partial leaks
    return re.compile("|".join(re.escape(v) for v in ordered)) if ordered else None


_SECRETS = _SecretRegistry()


def register_secrets(values: Iterable[str]) -> None:
    """Never print these strings (the config's keys, tokens, app secrets)."""
    _SECRETS.add(values)


def clear_secrets() -> None:
    """Forget every registered secret (tests; a reload that replaces them all)."""
    _SECRETS.clear()


def redact_text(text: str) -> str:
    """Registered secrets and credential patterns in free text replaced by the mask."""
    if text in _CLEAN:
        return text
    scrubbed = _SECRETS.scrub(text)
    if _hinted(scrubbed):  # only then can a pattern match
        for pattern, replacement in (*_PATTERNS, *_PAIR_PATTERNS):
            scrubbed = pattern.sub(replacement, scrubbed)
    if scrubbed == text and len(text) <= _CLEAN_MAX_CHARS:
        if len(_CLEAN) >= _CLEAN_CAPACITY:
            _CLEAN.clear()
        _CLEAN.add(text)
    return scrubbed


_DEPTH_SHOWN = 16  # levels of nested containers shown; deeper ones are "…"


def _redact_value(value: Any, *, masked: bool, depth: int = 0) -> Any:
    if value is None or isinstance(value, bool | int | float):
        return value  # counts (input_tokens=12) are not secrets
    if isinstance(value, str):
        return (MASK if value else value) if masked else redact_text(value)
    if isinstance(value, Mapping | list | tuple | set | frozenset) and depth >= _DEPTH_SHOWN:
        return "…"  # a model's tool arguments may nest past any recursion limit
    if isinstance(value, Mapping):
        return {
            redact_text(str(k)): _redact_value(
                v, masked=masked or _is_secret_key(k), depth=depth + 1
            )
            for k, v in value.items()
        }
    if isinstance(value, list | tuple | set | frozenset):
        return [_redact_value(v, masked=masked, depth=depth + 1) for v in value]
    if isinstance(value, os.PathLike):
        return MASK if masked else redact_text(str(os.fspath(value)))
    # Any other object is rendered now so that its text is scrubbed too.
    return MASK if masked else redact_text(repr(value))


def redact_data(value: Any) -> Any:
    """A JSON-like value as log events show it: values of secret-looking keys
    masked, registered secrets and credential patterns scrubbed from strings."""
    return _redact_value(value, masked=False)


def _is_secret_key(key: object) -> bool:
    return isinstance(key, str) and _secret_key_name(key)


@functools.lru_cache(maxsize=1_024)  # a program logs the same few keys over and over
def _secret_key_name(key: str) -> bool:
    return _SECRET_KEY.search(key) is not None


class _Key(enum.Enum):
    """What `redact_event` does with an event's key and its value."""

    INTERNAL = enum.auto()  # structlog/stdlib internals and our own fields: nothing
    PLAIN = enum.auto()  # the value scrubbed
    SECRET = enum.auto()  # the value masked (the key looks like a secret's)
    HOLDS_SECRET = enum.auto()  # the key itself scrubbed too


# each key's verdict: keys are few and logged again and again (emptied, like
# _CLEAN, when a secret is added)
_KEYS: Final[dict[str, _Key]] = {}
_PLAIN_VALUES: Final = frozenset({bool, int, float, type(None)})  # never secrets


def _key_verdict(key: str) -> _Key:
    verdict = _KEYS.get(key)
    if verdict is None:
        if key.startswith("_") or key == "exc_info" or key in _OWN_KEYS:
            verdict = _Key.INTERNAL  # rendered (and scrubbed) elsewhere, or never secret
        elif redact_text(key) != key:
            verdict = _Key.HOLDS_SECRET
        else:
            verdict = _Key.SECRET if _is_secret_key(key) else _Key.PLAIN
        if len(_KEYS) >= _CLEAN_CAPACITY:
            _KEYS.clear()
        _KEYS[key] = verdict
    return verdict


def redact_event(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    """structlog processor: scrub every key and string, mask the values of
    secret-looking keys. Most of what is logged (event names, channels,
    ids, counts) was found clean before and costs a lookup or two."""
    for key, value in list(event_dict.items()):
        verdict = _key_verdict(key)
        if verdict is _Key.PLAIN:
            if value.__class__ in _PLAIN_VALUES or (value.__class__ is str and value in _CLEAN):
                continue
            event_dict[key] = _redact_value(value, masked=False)
        elif verdict is _Key.SECRET:
            event_dict[key] = _redact_value(value, masked=True)
        elif verdict is _Key.HOLDS_SECRET:
            del event_dict[key]
            event_dict[redact_text(key)] = _redact_value(value, masked=_is_secret_key(key))
    return event_dict


def _scrub_rendered(_logger: WrappedLogger, _method: str, rendered: Any) -> str:
    """Last guard over the rendered line, for the registered secrets: every
    key and string in it was scrubbed already (`redact_event`). Keeps a JSON
    line valid JSON (only secrets that JSON leaves as they are, replaced by
    the mask, which JSON leaves too)."""
    # Typed Any: structlog's Processor type says EventDict, but after a renderer it is a str.
    return _SECRETS.scrub(str(rendered), rendered=True)


def _shared_processors() -> list[Processor]:
    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.add_log_level,
        structlog.stdlib.PositionalArgumentsFormatter(),
        structlog.stdlib.ExtraAdder(),
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]


def _json_line(event: EventDict, **kw: Any) -> str:
    """A JSON log line, by orjson (every turn writes one; json takes ten
    times as long); by json for what orjson refuses (an integer beyond 64
    bits, a lone surrogate). `redact_event` has made every other value plain
    JSON already (a key a string, anything else its repr)."""
    try:
        return orjson.dumps(event, default=kw.get("default")).decode()
    except TypeError:
        return json.dumps(event, **kw)


def _wants_console(fmt: str, stream: TextIO) -> bool:
    if fmt == "console":
        return True
    if fmt == "json":
        return False
    if fmt != "auto":
        raise ValueError(f"unknown log format {fmt!r} (auto, console or json)")
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class _LevelFilter:
    """structlog processor: drop what is below the configured level."""

    def __init__(self, level: int) -> None:
        self.level = level

    def __call__(self, _logger: WrappedLogger, method: str, event_dict: EventDict) -> EventDict:
        if _METHOD_LEVELS.get(method, logging.INFO) < self.level:
            raise structlog.DropEvent
        return event_dict


# a bound logger's method → its level: the configurable ones and their aliases
_METHOD_LEVELS: Final = {
    **_LEVELS,
    "msg": logging.INFO,
    "warn": logging.WARNING,
    "err": logging.ERROR,
    "exception": logging.ERROR,
    "critical": logging.CRITICAL,
    "fatal": logging.CRITICAL,
}


class _LineWriter:
    """What structlog writes our rendered lines to: the root handler's stream,
    under the handler's lock. `name` is the logger's (`add_logger_name`)."""

    __slots__ = ("_handler", "name")

    def __init__(self, handler: logging.StreamHandler[TextIO], name: str = "", *_: Any) -> None:
        self._handler = handler
        self.name = name

    def msg(self, line: str) -> None:
        handler = self._handler
        with handler.lock or contextlib.nullcontext():
            try:
                handler.stream.write(line + "\n")
                handler.stream.flush()
            except Exception:  # a closed or broken stream: never the caller's problem
                handler.handleError(_UNWRITTEN)  # what the handler does with its own lines

    debug = info = warning = warn = error = err = exception = critical = fatal = msg


# what `Handler.handleError` is given for a line of ours it could not write
_UNWRITTEN: Final = logging.LogRecord(
    "picobot", logging.ERROR, "", 0, "log line not written", None, None
)


def configure_logging(
    level: str, fmt: str, *, stream: TextIO | None = None, tail: LogTail | None = LOG_TAIL
) -> None:
    """Route structlog and stdlib logging through one redacting pipeline.

    `level`: debug | info | warning | error. `fmt`: auto (console on a TTY,
    JSON lines otherwise) | console | json. Logs go to `stream` (stderr by
    default). Each line also goes, redacted, to `tail` (the console's Logs
    view). Calling it again replaces the previous configuration.
    """
    try:
        numeric = _LEVELS[level.lower()]
    except KeyError:
        raise ValueError(f"unknown log level {level!r} ({', '.join(_LEVELS)})") from None
    out = sys.stderr if stream is None else stream
    console = _wants_console(fmt, out)
    renderer: Processor
    if console:
        colors = bool(getattr(out, "isatty", None) and out.isatty())
        renderer = structlog.dev.ConsoleRenderer(
            colors=colors, exception_formatter=structlog.dev.plain_traceback
        )
    else:
        renderer = structlog.processors.JSONRenderer(_json_line, ensure_ascii=False)

    # The same steps for every line after the fields are gathered: a
    # library's record (the handler's formatter) and our own events.
    rendering: list[Processor] = [
        structlog.processors.StackInfoRenderer(),
        structlog.processors.format_exc_info,  # exception text, then redacted
        redact_event,
        *([tail] if tail is not None and console else []),  # the event, kept for the console
        renderer,
        _scrub_rendered,
        *([tail.rendered] if tail is not None and not console else []),  # the JSON line
    ]
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=_shared_processors(),
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *rendering],
    )
    handler = logging.StreamHandler(out)
    handler.setFormatter(formatter)
    setattr(handler, _OUR_HANDLER, True)

    # A record's caller, thread and process are never shown: not collecting
    # them is the logging HOWTO's own optimisation (it spares a frame walk per line).
    logging._srcfile = None
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False

    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _OUR_HANDLER, False)]:
        root.removeHandler(old)
        old.close()
    root.addHandler(handler)
    root.setLevel(numeric)
    for name in _CHATTY_LOGGERS:
        logging.getLogger(name).setLevel(
            logging.NOTSET if numeric <= logging.DEBUG else logging.WARNING
        )
    for name in _QUIET_LOGGERS:
        logging.getLogger(name).setLevel(max(numeric, logging.WARNING))
    # a malformed request: one warning per peer a minute, not an error and a traceback each
    server = logging.getLogger(SERVER_LOGGER)
    for stale in [f for f in server.filters if isinstance(f, MalformedRequestFilter)]:
        server.removeFilter(stale)
    server.addFilter(MalformedRequestFilter())

    # Our own events do not go through stdlib logging (a record, a handler
    # call and a second processor chain per line: most of what a line cost,
    # and every turn writes one): rendered here, they are written to the
    # handler's stream under its lock, as whole lines like its own.
    structlog.configure(
        processors=[
            _LevelFilter(numeric),
            structlog.contextvars.merge_contextvars,
            structlog.stdlib.add_logger_name,
            structlog.stdlib.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            *rendering,
        ],
        logger_factory=functools.partial(_LineWriter, handler),
        # every method real and none filtering by itself: `_LevelFilter` does,
        # so that structlog.testing.capture_logs (which replaces the
        # processors) still sees every event, as before
        wrapper_class=structlog.make_filtering_bound_logger(logging.NOTSET),
        context_class=dict,
        # Not cached: modules create their loggers at import time, before this
        # runs, and a later reconfiguration must reach them too.
        cache_logger_on_first_use=False,
    )
