"""What an operator runs on: `logging` (structlog and the stdlib pipeline,
redaction), `metrics` (Prometheus), `metered` (LLM latency and tokens),
`retention` and `media_retention` (what a months-long gateway deletes),
`malformed_requests` (aiohttp's parse errors, throttled) and `hardening`
(the sandbox check and a non-dumpable process at start).

Public: gateway.ops.hardening, gateway.ops.logging, gateway.ops.metered, gateway.ops.metrics, gateway.ops.retention
May import: agent, gateway.clock, gateway.config, gateway.lifecycle, storage
"""
