"""What an operator runs on: `logging` (structlog and the stdlib pipeline,
redaction), `metrics` (Prometheus), `metered` (LLM latency and tokens),
`retention` and `media_retention` (what a months-long gateway deletes),
`tracing` (OpenTelemetry traces; `otel`, the SDK behind it, imported only
when tracing is on), `malformed_requests` (aiohttp's parse errors, throttled), `hardening`
(the sandbox check and a non-dumpable process at start), `tail` (the log's
last lines in memory, for the console) and `doctor` (`picobot doctor`'s checks).

Public: gateway.ops.hardening, gateway.ops.logging, gateway.ops.metered, gateway.ops.metrics, gateway.ops.retention, gateway.ops.tracing, gateway.ops.tail, gateway.ops.doctor.checks, gateway.ops.doctor.findings, gateway.ops.doctor.probe
May import: agent, channels.base, gateway.bus, gateway.clock, gateway.config, gateway.lifecycle, gateway.work, storage
"""
