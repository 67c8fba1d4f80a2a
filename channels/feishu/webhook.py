"""Webhook mode: the aiohttp handler behind POST /webhooks/feishu.

Answers the URL check (plain or encrypted), decrypts bodies, verifies the
signature whenever an encrypt key is configured (401, nothing recorded, on a
mismatch) and the verification token, and hands each event to the channel.
`{"msg":"success"}` goes back only after the channel's handler returned, i.e.
after the message is durably recorded; a transient failure answers 5xx so
Feishu redelivers. An authenticated event that cannot be read is kept as a
dead letter and answered 200 (redelivering it could never succeed). Oversize
or unauthenticated malformed bodies get 400. Never logs a secret or a body.
"""

from __future__ import annotations

import asyncio
import hmac
import json
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from aiohttp import web

from channels.base import ChannelRuntime
from channels.feishu.config import FeishuConfig
from channels.feishu.crypto import DecryptError, decrypt, verify_signature
from channels.feishu.parse import Envelope, EventFormatError, parse_envelope
from gateway.bus import BusClosed

__all__ = ["WEBHOOK_PATH", "FeishuWebhook"]

WEBHOOK_PATH = "/webhooks/feishu"

log = structlog.get_logger("channels.feishu.webhook")

EnvelopeHandler = Callable[[Envelope], Awaitable[None]]


class FeishuWebhook:
    def __init__(
        self, config: FeishuConfig, handle: EnvelopeHandler, runtime: ChannelRuntime
    ) -> None:
        self._config = config
        self._handle = handle
        self._runtime = runtime

    async def handle(self, request: web.Request) -> web.StreamResponse:
        raw = await _read_limited(request, self._config.max_webhook_body_bytes)
        if raw is None:
            return _error(400, "body too large")
        body = _json_object(raw)
        if body is None:
            return _error(400, "body is not a JSON object")
        key = self._config.encrypt_key.get_secret_value() if self._config.encrypt_key else None
        if "encrypt" in body:
            if key is None:
                return _error(400, "encrypted event but no encrypt_key configured")
            try:
                body = _json_object(decrypt(key, str(body["encrypt"])).encode())
            except DecryptError:
                log.warning("feishu webhook: undecryptable body", channel="feishu")
                return _error(400, "cannot decrypt")
            if body is None:
                return _error(400, "decrypted body is not a JSON object")

        if body.get("type") == "url_verification":
            if not self._token_ok(body.get("token")):
                return _error(401, "verification token mismatch")
            return web.json_response({"challenge": body.get("challenge", "")})

        if key is not None and not verify_signature(request.headers, key, raw):
            log.warning("feishu webhook: bad signature", channel="feishu", remote=request.remote)
            return _error(401, "signature mismatch")
        try:
            envelope = parse_envelope(body)
        except EventFormatError as exc:
            return _error(400, str(exc))
        if not self._token_ok(envelope.token):
            log.warning("feishu webhook: bad verification token", channel="feishu")
            return _error(401, "verification token mismatch")
        try:
            await self._handle(envelope)
        except asyncio.CancelledError:
            raise
        except BusClosed:
            return _error(503, "shutting down")
        except EventFormatError as exc:  # the event itself cannot be read: redelivery won't help
            log.warning("feishu webhook: unreadable event", event_id=envelope.event_id)
            try:
                await self._runtime.dead_letter(
                    envelope.event_id, raw, f"unreadable event: {type(exc).__name__}"
                )
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("feishu webhook: dead letter not recorded")
                return _error(500, "event not recorded")
        except Exception:
            log.exception("feishu webhook: event handling failed", event_id=envelope.event_id)
            return _error(500, "event not recorded")
        return web.json_response({"msg": "success"})

    def _token_ok(self, token: Any) -> bool:
        expected = self._config.verification_token
        if expected is None:
            return True
        return isinstance(token, str) and hmac.compare_digest(
            token.encode("utf-8", "surrogatepass"), expected.get_secret_value().encode()
        )


async def _read_limited(request: web.Request, limit: int) -> bytes | None:
    if request.content_length is not None and request.content_length > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.content.iter_chunked(65536):
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _json_object(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):  # read before the signature check
        return None
    return value if isinstance(value, dict) else None


def _error(status: int, reason: str) -> web.Response:
    return web.json_response({"msg": reason}, status=status)
