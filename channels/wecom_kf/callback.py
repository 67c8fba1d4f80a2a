"""The callback URL (`path`, default /webhooks/wecom_kf): URL check and event notices.

GET `?msg_signature&timestamp&nonce&echostr`: verify, decrypt, answer the
plaintext (no quotes, BOM or newline) — how WeCom checks the URL when it is
saved. POST: XML with `<Encrypt>`, signed the same way; the decrypted XML of a
customer-service notice is `Event=kf_msg_or_event` with `Token` and
`OpenKfId`. The notice is recorded (token stored, the account marked for a
pull) before `success` goes back — quickly: the pull runs after the answer, as
WeCom wants one within 5 s. Bad signature 401, bad payload or receive id 400,
a signed `timestamp` more than REPLAY_WINDOW_SECS from our clock (either way:
a captured callback replayed later, or a skewed clock) 403, all with nothing
recorded; a failure to record 500 (WeCom retries); other events are
acknowledged and ignored. Never logs a secret or a body.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping

import structlog
from aiohttp import web

from channels.capped import CHUNK, BodyTooLarge, read_capped
from channels.wecom_kf.crypto import CallbackCrypto, DecryptError, SignatureError
from channels.wecom_kf.parse import CallbackNotice, MalformedItem, parse_xml

__all__ = ["KF_EVENT", "REPLAY_WINDOW_SECS", "CallbackEndpoint"]

log = structlog.get_logger("channels.wecom_kf")

KF_EVENT = "kf_msg_or_event"
REPLAY_WINDOW_SECS = 300  # how far a callback's signed timestamp may be from now

NoticeHandler = Callable[[CallbackNotice], Awaitable[None]]


class CallbackEndpoint:
    def __init__(
        self,
        crypto: CallbackCrypto,
        handle: NoticeHandler,
        max_body_bytes: int,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._crypto = crypto
        self._handle = handle
        self._max = max_body_bytes
        self._clock = clock

    async def verify_url(self, request: web.Request) -> web.StreamResponse:
        q = request.query
        echostr = q.get("echostr", "")
        if not echostr:
            return _error(400, "echostr missing")
        plain = self._open(q, echostr)
        if isinstance(plain, web.Response):
            return plain
        return web.Response(text=plain, content_type="text/plain")

    async def receive(self, request: web.Request) -> web.StreamResponse:
        try:
            raw = await read_capped(
                request.content.iter_chunked(CHUNK), self._max, declared=request.content_length
            )
        except BodyTooLarge:
            return _error(413, "body too large")
        try:
            encrypt = parse_xml(raw, "Encrypt")["Encrypt"]
        except MalformedItem:
            return _error(400, "body is not XML")
        if not encrypt:
            return _error(400, "no Encrypt element")
        plain = self._open(request.query, encrypt)
        if isinstance(plain, web.Response):
            return plain
        try:
            fields = parse_xml(plain, "MsgType", "Event", "Token", "OpenKfId")
        except MalformedItem:
            log.warning("wecom_kf callback: decrypted body is not XML")
            return _error(400, "decrypted body is not XML")
        if fields["Event"] != KF_EVENT or not fields["OpenKfId"]:
            # `event` is structlog's own argument (the message): the type goes as `kind`
            kind = fields["Event"] or fields["MsgType"]
            log.info("wecom_kf callback: acknowledged and ignored", kind=kind)
            return _success()
        notice = CallbackNotice(fields["Event"], fields["Token"], fields["OpenKfId"])
        try:
            await self._handle(notice)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("wecom_kf callback: notice not recorded")
            return _error(500, "not recorded")
        return _success()

    def _open(self, query: Mapping[str, str], encrypt: str) -> str | web.Response:
        """Check the signature over `encrypt` and decrypt it; a 4xx response if not."""
        sig, ts, nonce = (query.get(k, "") for k in ("msg_signature", "timestamp", "nonce"))
        if not sig or not ts or not nonce:
            return _error(400, "msg_signature, timestamp and nonce are required")
        try:
            self._crypto.verify(sig, ts, nonce, encrypt)
        except SignatureError:
            log.warning("wecom_kf callback: bad signature")
            return _error(401, "signature mismatch")
        if (refused := self._stale(ts)) is not None:
            return refused
        try:
            return self._crypto.decrypt(encrypt)
        except DecryptError as exc:
            log.warning("wecom_kf callback: undecryptable payload", reason=str(exc))
            return _error(400, "cannot decrypt")

    def _stale(self, ts: str) -> web.Response | None:
        """A 403 when the signed timestamp is outside the replay window, either way."""
        try:
            sent_at = int(ts)
        except ValueError:
            return _error(400, "timestamp is not a number")
        skew = self._clock() - sent_at
        if abs(skew) > REPLAY_WINDOW_SECS:
            log.warning("wecom_kf callback: timestamp outside the window", skew_secs=int(skew))
            return _error(403, "timestamp outside the replay window")
        return None


def _success() -> web.Response:
    return web.Response(text="success", content_type="text/plain")


def _error(status: int, reason: str) -> web.Response:
    return web.Response(status=status, text=reason, content_type="text/plain")
