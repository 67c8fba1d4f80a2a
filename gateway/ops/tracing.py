"""OpenTelemetry traces (docs/observability.md): one trace per inbound message.

Off unless `observability.otlp_endpoint` or the environment's
OTEL_EXPORTER_OTLP_ENDPOINT names an OTLP/HTTP collector. Off, nothing of
OpenTelemetry is imported and every function here returns at once, so
start-up time and memory stay as they were; on, `start` imports the SDK
(gateway.ops.otel) and installs it for the process until `Tracing.stop`.

A message's spans:

    message                root: the inbound processor records it … its last send
    ├── turn               (gateway.turns.execution), current while it runs
    │   ├── chat <model>   each model call (gateway.ops.metered), GenAI attributes;
    │   │                  its `traceparent` goes out on the provider's request
    │   ├── execute_tool <name>   each tool call (agent.tools.base.TOOL_SCOPE),
    │   │   └── …                 a sub-agent's calls inside it
    │   └── compaction     one the turn needed (a request refused as too long)
    ├── compaction         the one after the turn (gateway.sessions.compaction)
    └── send               each attempt at a reply stamped with the trace
                           (gateway.delivery.outbound)

The context travels from the inbox to the turn on the `WorkItem` (its
`MessageTrace`), and from the turn to the outbox in the row's metadata
(`traceparent`): within this process. A message recovered after a restart
starts a new trace. Attributes hold names, ids and counts: never a
message's text, a tool's arguments or a secret.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import importlib.metadata
import re
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Final, Protocol
from urllib.parse import urlsplit

import structlog

from agent.messages import ToolCall
from agent.providers.base import REQUEST_HEADERS, LLMRequest, LLMResponse
from agent.tools.base import TOOL_SCOPE
from gateway.bus import InboundMessage, OutboundMessage
from gateway.config.core import ObservabilityConfig
from gateway.work import MessageTrace, WorkItem

if TYPE_CHECKING:
    from gateway.ops.otel import OtelBackend, Span

__all__ = [
    "TRACEPARENT_KEY",
    "SpanAttributes",
    "Tracing",
    "begin_message",
    "compaction",
    "delivered",
    "last_trace_id",
    "model_call",
    "model_response",
    "sending",
    "stamped",
    "start",
    "target",
    "traceparent_of",
    "turn",
]

log = structlog.get_logger(__name__)

TRACEPARENT_KEY: Final = "traceparent"  # in an outbox row's metadata
_OPEN_MAX: Final = 10_000  # message roots open at once; the oldest is ended beyond it
_OPEN_MAX_SECS: Final = 3600.0  # a root open longer (a reply parked for hours) is ended
_LAST_MAX: Final = 4096  # chats whose last trace /status shows
_TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$")


class SpanAttributes(Protocol):
    """What a caller may add to a span it was handed (None when tracing is off)."""

    def set_attribute(self, key: str, value: str | bool | int | float | Sequence[str]) -> None: ...


_backend: OtelBackend | None = None
_open: OrderedDict[str, _Message] = OrderedDict()  # trace id → its message, oldest first
_last: OrderedDict[tuple[str, str], str] = OrderedDict()  # (channel, chat) → trace id


def target(config: ObservabilityConfig, env: Mapping[str, str]) -> tuple[bool, str | None]:
    """Whether tracing is on, and the URL spans are posted to: the config's
    collector's /v1/traces, else None for the one the environment names
    (the exporter reads it). OTEL_SDK_DISABLED=true turns it off."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False, None
    if config.otlp_endpoint:
        return True, config.otlp_endpoint.rstrip("/") + "/v1/traces"
    named = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    return bool(named), None


class Tracing:
    """The SDK installed by `start`, for the composition root to stop."""

    def __init__(self, backend: OtelBackend) -> None:
        self.backend = backend

    async def stop(self, timeout_secs: float) -> None:
        """End the roots still open, export what is queued within `timeout_secs`
        (the gateway's shutdown budget), uninstall."""
        global _backend
        for message in list(_open.values()):
            message.end(cut=True)
        if _backend is self.backend:
            _backend = None
            _last.clear()
        if not await self.backend.shutdown(timeout_secs):
            log.warning("traces_not_flushed", waited_secs=round(timeout_secs, 2))


async def start(config: ObservabilityConfig, env: Mapping[str, str]) -> Tracing | None:
    """Install the SDK when tracing is on (imported off the event loop)."""
    global _backend
    on, url = target(config, env)
    if not on:
        return None
    try:
        otel = await asyncio.to_thread(importlib.import_module, "gateway.ops.otel")
    except ImportError as exc:  # the `otel` extra is not installed: run untraced
        log.error(
            "tracing_unavailable", missing=exc.name, fix="pip install 'picobot-gateway[otel]'"
        )
        return None
    backend: OtelBackend = await asyncio.to_thread(otel.OtelBackend, url, _version())
    _backend = backend
    shown = urlsplit(url)._replace(netloc=urlsplit(url).netloc.rpartition("@")[2]) if url else None
    log.info("tracing_on", endpoint=shown.geturl() if shown else "OTEL_EXPORTER_OTLP_ENDPOINT")
    return Tracing(backend)


def _version() -> str:
    try:
        return importlib.metadata.version("picobot-gateway")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


# -- a message's root --------------------------------------------------------------
class _Message:
    """A `MessageTrace`: the root ends once the message is `done` and every
    reply stamped with it was sent or given up (`delivered`)."""

    __slots__ = ("_holds", "_processing", "_span", "born", "trace_id", "traceparent")

    def __init__(self, span: Span, traceparent: str, trace_id: str) -> None:
        self._span: Span | None = span
        self.traceparent = traceparent
        self.trace_id = trace_id
        self.born = time.monotonic()
        self._holds = 1  # the message's own, until `done`
        self._processing = True

    def stamp(self, message: OutboundMessage) -> OutboundMessage:
        if self._span is not None:
            self._holds += 1
        metadata = {**message.metadata, TRACEPARENT_KEY: self.traceparent}
        return dataclasses.replace(message, metadata=metadata)

    def done(self) -> None:
        if self._processing:
            self._processing = False
            self.release()

    def release(self) -> None:
        self._holds -= 1
        if self._holds <= 0:
            self.end()

    def end(self, *, cut: bool = False) -> None:
        span, self._span = self._span, None
        _open.pop(self.trace_id, None)
        if span is not None:
            if cut:  # ended before every reply was sent: at shutdown, or kept too long
                span.set_attribute("picobot.trace.cut", True)
            span.end()


def begin_message(
    message: InboundMessage, inbox_id: int, *, start_ns: int | None = None, recovered: bool = False
) -> MessageTrace | None:
    """A new trace for a message just recorded in the inbox (`start_ns`: when
    its recording began); None when tracing is off."""
    backend = _backend
    if backend is None:
        return None
    _prune()
    attributes: dict[str, str | bool | int] = {
        "picobot.channel": message.channel,
        "picobot.chat_id": message.chat_id,
        "picobot.chat_type": message.chat_type.value,
        "picobot.origin": message.request.origin.value,
        "picobot.inbox_id": inbox_id,
    }
    if recovered:
        attributes["picobot.recovered"] = True
    span = backend.start("message", attributes, kind="consumer", start_ns=start_ns, root=True)
    trace = _Message(span, backend.traceparent(span), backend.trace_id(span))
    _open[trace.trace_id] = trace
    return trace


def stamped(item: WorkItem, out: OutboundMessage | None) -> OutboundMessage | None:
    """`out`, a reply to `item`, carrying the item's trace: its send ends the trace."""
    return out if out is None or item.trace is None else item.trace.stamp(out)


def traceparent_of(item: WorkItem) -> str | None:
    return None if item.trace is None else item.trace.traceparent


def _prune() -> None:
    cutoff = time.monotonic() - _OPEN_MAX_SECS
    while _open:
        oldest = next(iter(_open.values()))
        if len(_open) < _OPEN_MAX and oldest.born > cutoff:
            return
        oldest.end(cut=True)


# -- a turn and what runs in it -----------------------------------------------------
class _Off:
    def set_attribute(self, key: str, value: str | bool | int | float | Sequence[str]) -> None:
        return None


_OFF: Final = _Off()


@contextmanager
def turn(items: Sequence[WorkItem], run_id: str) -> Iterator[SpanAttributes]:
    """The turn's span, current while it runs: a child of its first message's
    root (the others linked); its log lines carry `trace_id`; each tool call
    runs in a span of its own. Then the messages are done."""
    backend = _backend
    traces = [item.trace for item in items if item.trace is not None]
    if backend is None:
        yield _OFF
        return
    channel, chat_id = items[0].conversation
    attributes: dict[str, str | int] = {
        "picobot.channel": channel,
        "picobot.chat_id": chat_id,
        "picobot.run_id": run_id,
        "picobot.messages": len(items),
    }
    parent = traces[0].traceparent if traces else None
    links = [t.traceparent for t in traces[1:]]
    try:
        with backend.span("turn", attributes, parent=parent, links=links) as span:
            trace_id = backend.trace_id(span)
            _remember(channel, chat_id, trace_id)
            scope = TOOL_SCOPE.set(_tool_span)
            try:
                with structlog.contextvars.bound_contextvars(trace_id=trace_id):
                    yield span
            finally:
                TOOL_SCOPE.reset(scope)
    finally:
        for trace in traces:
            trace.done()


@contextmanager
def _tool_span(call: ToolCall) -> Iterator[object]:
    backend = _backend
    if backend is None:
        yield None
        return
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.name,
        "gen_ai.tool.call.id": call.id,
    }
    with backend.span(f"execute_tool {call.name}", attributes) as span:
        yield span


@contextmanager
def model_call(system: str, provider: str, request: LLMRequest) -> Iterator[SpanAttributes | None]:
    """A model call's span inside a trace (none outside one, e.g. memory
    maintenance): current while it runs, and its `traceparent` added to the
    provider's HTTP request. `model_response` records the answer on it."""
    backend = _backend
    if backend is None or not backend.in_trace():
        yield None
        return
    attributes: dict[str, str | int | float] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.system": system,
        "gen_ai.provider.name": system,
        "gen_ai.request.model": request.model,
        "picobot.provider": provider,
    }
    if request.max_tokens is not None:
        attributes["gen_ai.request.max_tokens"] = request.max_tokens
    if request.temperature is not None:
        attributes["gen_ai.request.temperature"] = request.temperature
    with backend.span(f"chat {request.model}", attributes, kind="client") as span:
        headers = REQUEST_HEADERS.set({TRACEPARENT_KEY: backend.traceparent(span)})
        try:
            yield span
        finally:
            REQUEST_HEADERS.reset(headers)


def model_response(span: SpanAttributes | None, request: LLMRequest, response: LLMResponse) -> None:
    """The GenAI attributes of an answer: the model, why it stopped, the tokens."""
    if span is None:
        return
    span.set_attribute("gen_ai.response.model", response.model or request.model)
    if response.finish_reason:
        span.set_attribute("gen_ai.response.finish_reasons", [response.finish_reason])
    usage = response.usage
    if usage is not None:
        span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
        span.set_attribute("gen_ai.usage.cache_read.input_tokens", usage.cache_read_tokens)
        span.set_attribute("gen_ai.usage.cache_creation.input_tokens", usage.cache_write_tokens)


@contextmanager
def compaction(reason: str, *, session_id: str = "", parent: str | None = None) -> Iterator[None]:
    """A compaction's span (`reason`: after_turn, command, overflow): a child
    of `parent` (a message's traceparent), else of the current span; none
    outside a trace."""
    backend = _backend
    if backend is None or (parent is None and not backend.in_trace()):
        yield
        return
    attributes = {"picobot.compaction.reason": reason}
    if session_id:
        attributes["picobot.session_id"] = session_id
    with backend.span("compaction", attributes, parent=parent):
        yield


# -- outbox sends --------------------------------------------------------------------
def _traceparent_in(metadata: Mapping[str, object]) -> str | None:
    value = metadata.get(TRACEPARENT_KEY)
    return value if isinstance(value, str) and _TRACEPARENT.match(value) else None


@contextmanager
def sending(message: OutboundMessage) -> Iterator[None]:
    """One attempt at sending an outbox row stamped with a trace, as its span."""
    backend = _backend
    parent = _traceparent_in(message.metadata) if backend is not None else None
    if backend is None or parent is None:
        yield
        return
    attributes: dict[str, str | int] = {
        "picobot.channel": message.channel,
        "picobot.chat_id": message.chat_id,
        "picobot.attempt": message.attempt,
    }
    if message.outbox_id is not None:
        attributes["picobot.outbox_id"] = message.outbox_id
    with backend.span("send", attributes, parent=parent, kind="client"):
        yield


def delivered(metadata: Mapping[str, object]) -> None:
    """The outbox row with `metadata` was sent, or given up (failed, parked):
    its message's root need not wait for it any longer."""
    if _backend is None:
        return
    parent = _traceparent_in(metadata)
    match = _TRACEPARENT.match(parent) if parent is not None else None
    trace = _open.get(match.group(1)) if match is not None else None
    if trace is not None:
        trace.release()


# -- /status ---------------------------------------------------------------------------
def _remember(channel: str, chat_id: str, trace_id: str) -> None:
    key = (channel, chat_id)
    _last[key] = trace_id
    _last.move_to_end(key)
    if len(_last) > _LAST_MAX:
        _last.popitem(last=False)


def last_trace_id(channel: str, chat_id: str) -> str | None:
    """The trace of the chat's last turn in this process; None when tracing is off."""
    return _last.get((channel, chat_id)) if _backend is not None else None
