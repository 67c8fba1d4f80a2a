"""The OpenTelemetry SDK behind gateway.ops.tracing, imported only when tracing
is on (never at start-up otherwise: the SDK, its exporter and protobuf cost
start-up time and memory).

One `TracerProvider` of our own (not the process-wide global one, which can
be set once per process), a `BatchSpanProcessor` with a bounded queue (a
span beyond it is dropped, never waited for) and the OTLP/HTTP exporter,
which sends from the processor's own thread: nothing here blocks the event
loop. `shutdown` flushes and stops them from a daemon thread of its own,
waited for at most the time it is given.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Final

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

__all__ = ["KINDS", "OtelBackend", "Span"]

SERVICE: Final = "picobot"
MAX_QUEUE: Final = 2048  # spans waiting for export; beyond it the SDK drops them
KINDS: Final = {
    "internal": SpanKind.INTERNAL,
    "client": SpanKind.CLIENT,
    "consumer": SpanKind.CONSUMER,
}

Attributes = Mapping[str, AttributeValue]


class OtelBackend:
    def __init__(self, endpoint: str | None, version: str) -> None:
        """`endpoint`: the full URL of the collector's /v1/traces; None: the
        one the environment names (OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT)."""
        resource = Resource.create({SERVICE_NAME: SERVICE, SERVICE_VERSION: version})
        self.provider = TracerProvider(resource=resource)
        exporter = OTLPSpanExporter(endpoint=endpoint)  # 10 s a request, or OTEL_…_TIMEOUT
        self.provider.add_span_processor(
            BatchSpanProcessor(exporter, max_queue_size=MAX_QUEUE, max_export_batch_size=512)
        )
        self.tracer = self.provider.get_tracer(SERVICE, version)
        self._propagator = TraceContextTextMapPropagator()

    # -- spans ---------------------------------------------------------------
    def start(
        self,
        name: str,
        attributes: Attributes,
        *,
        parent: str | None = None,
        kind: str = "internal",
        start_ns: int | None = None,
        root: bool = False,
    ) -> Span:
        """A span not made current: a child of `parent` (a traceparent), else
        of the current span, or a new trace's root with `root`."""
        if root:
            ctx: otel_context.Context | None = otel_context.Context()
        else:
            ctx = self._context_of(parent) if parent is not None else None
        return self.tracer.start_span(
            name, ctx, KINDS[kind], attributes=attributes, start_time=start_ns
        )

    @contextmanager
    def span(
        self,
        name: str,
        attributes: Attributes,
        *,
        parent: str | None = None,
        kind: str = "internal",
        links: Sequence[str] = (),
    ) -> Iterator[Span]:
        """A span made current while the block runs, ended after it; a block
        that raises marks it with the exception's type (never its text)."""
        ctx = self._context_of(parent) if parent is not None else None
        joined = [Link(c) for c in (self._span_context(tp) for tp in links) if c is not None]
        span = self.tracer.start_span(name, ctx, KINDS[kind], attributes=attributes, links=joined)
        token = otel_context.attach(trace.set_span_in_context(span))
        try:
            yield span
        except asyncio.CancelledError:
            span.set_attribute("picobot.cancelled", True)
            raise
        except BaseException as exc:
            failed(span, type(exc).__name__)
            raise
        finally:
            otel_context.detach(token)
            span.end()

    def in_trace(self) -> bool:
        """Whether a span of ours is current."""
        return trace.get_current_span().get_span_context().is_valid

    # -- ids ----------------------------------------------------------------------
    @staticmethod
    def traceparent(span: Span) -> str:
        c = span.get_span_context()
        return f"00-{c.trace_id:032x}-{c.span_id:016x}-{int(c.trace_flags):02x}"

    @staticmethod
    def trace_id(span: Span) -> str:
        return f"{span.get_span_context().trace_id:032x}"

    def _context_of(self, traceparent: str) -> otel_context.Context:
        return self._propagator.extract({"traceparent": traceparent}, otel_context.Context())

    def _span_context(self, traceparent: str) -> trace.SpanContext | None:
        context = trace.get_current_span(self._context_of(traceparent)).get_span_context()
        return context if context.is_valid else None

    # -- the end ------------------------------------------------------------------
    async def shutdown(self, timeout_secs: float) -> bool:
        """Export what is queued and stop; False when that took longer than
        `timeout_secs` (the daemon thread doing it is then left to the exit)."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()

        def run() -> None:
            try:
                self.provider.shutdown()
            finally:
                with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                    loop.call_soon_threadsafe(_settle, done)

        threading.Thread(target=run, name="otel-shutdown", daemon=True).start()
        try:
            async with asyncio.timeout(max(0.0, timeout_secs)):
                await asyncio.shield(done)
        except TimeoutError:
            return False
        return True


def failed(span: Span, error_type: str) -> None:
    span.set_attribute("error.type", error_type)
    span.set_status(Status(StatusCode.ERROR, error_type))


def _settle(done: asyncio.Future[None]) -> None:
    if not done.done():
        done.set_result(None)
