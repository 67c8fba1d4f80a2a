"""A fake OpenTelemetry collector for tests: an aiohttp app on 127.0.0.1 port 0
taking POST /v1/traces as OTLP/HTTP does (a protobuf `ExportTraceServiceRequest`,
decoded with the official `opentelemetry-proto` package) and keeping every
span it was sent, its attributes as plain Python values. `hold()` makes each
export wait until `release()` (a collector that does not answer).
"""

from __future__ import annotations

import asyncio
import gzip
from dataclasses import dataclass
from typing import Any, Self

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

__all__ = ["FakeCollector", "ReceivedSpan"]


@dataclass(frozen=True, slots=True)
class ReceivedSpan:
    name: str
    trace_id: str  # 32 hex digits
    span_id: str  # 16
    parent_id: str  # "" for a root
    kind: int
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    resource: dict[str, Any]
    status_code: int
    links: tuple[str, ...]  # the trace ids of the linked spans


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind) if kind else None


class FakeCollector:
    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.exports = 0
        self._gate = asyncio.Event()
        self._gate.set()
        self._runner: web.AppRunner | None = None
        self._port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    def hold(self) -> None:
        self._gate.clear()

    def release(self) -> None:
        self._gate.set()

    def traces(self) -> dict[str, list[ReceivedSpan]]:
        """The spans by trace id, each trace's in the order they came."""
        found: dict[str, list[ReceivedSpan]] = {}
        for span in self.spans:
            found.setdefault(span.trace_id, []).append(span)
        return found

    async def _traces(self, request: web.Request) -> web.Response:
        body = await request.read()
        if request.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        if request.content_type != "application/x-protobuf":
            return web.Response(status=415)
        export = ExportTraceServiceRequest()
        export.ParseFromString(body)
        self.exports += 1
        for resource_spans in export.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope in resource_spans.scope_spans:
                for s in scope.spans:
                    self.spans.append(
                        ReceivedSpan(
                            name=s.name,
                            trace_id=s.trace_id.hex(),
                            span_id=s.span_id.hex(),
                            parent_id=s.parent_span_id.hex(),
                            kind=s.kind,
                            start_ns=s.start_time_unix_nano,
                            end_ns=s.end_time_unix_nano,
                            attributes={a.key: _value(a.value) for a in s.attributes},
                            resource=resource,
                            status_code=s.status.code,
                            links=tuple(link.trace_id.hex() for link in s.links),
                        )
                    )
        await self._gate.wait()
        return web.Response(
            body=ExportTraceServiceResponse().SerializeToString(),
            content_type="application/x-protobuf",
        )

    async def __aenter__(self) -> Self:
        app = web.Application()
        app.router.add_post("/v1/traces", self._traces)
        runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self._runner = runner
        self._port = runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._gate.set()
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()
