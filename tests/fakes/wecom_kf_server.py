"""A fake WeCom customer-service platform on 127.0.0.1: qyapi and the callback sender.

`FakeWecomKf` serves, on one aiohttp app (port 0), what `channels.wecom_kf` calls:
- `GET /cgi-bin/gettoken?corpid&corpsecret` → `{access_token, expires_in}`;
  `expire_tokens()` makes every issued token answer 42001 (unknown ones 40014);
- `POST /cgi-bin/kf/sync_msg` → pages of the customer-service message log from
  an opaque cursor (`page_size` per page, `has_more`); the body's `token` must
  be one a callback carried (or absent), else errcode 95007;
- `POST /cgi-bin/kf/send_msg` → checks the body shape, ≤ 2048 bytes of text,
  and the "5 messages within 48 h of the customer's last message" rule (95001);
- `GET /cgi-bin/media/get` → the bytes with Content-Disposition, or JSON errcode;
  `hold_media()` makes downloads wait until `release_media()`; a file added
  with `add_streamed_media` streams `total` bytes (chunked, no length) and
  counts what it got to send before the client hung up.
`fail_next(endpoint, errcode)` injects one error. The callback side signs and
encrypts like WeCom does, with its own implementation of the documented
algorithm (cryptography primitives, nothing of the channel's code): `notify`
POSTs a `kf_msg_or_event` notice, `verify_url` does the URL check, both with
optional corruption (bad signature, bad ciphertext, wrong receive id) and an
optional `timestamp` (seconds since the epoch) to sign instead of now.
Anything the client gets wrong on the wire is recorded in `protocol_errors`.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import itertools
import json
import os
import secrets
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Self

import aiohttp
from aiohttp import web
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from tests.fakes.streamed import StreamedBody, stream_body

# The documented test vector's settings (PROTOCOLS.md, WeCom section).
CORP_ID = "wx5823bf96d3bd56c7"
CALLBACK_TOKEN = "QDG6eK"
ENCODING_AES_KEY = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C"
SECRET = "fake-kf-secret"
OPEN_KFID = "wkFAKEkf0001"
MAX_TEXT_BYTES = 2048
WINDOW_SECS = 48 * 3600
WINDOW_MESSAGES = 5


# -- the documented algorithm, written independently of channels.wecom_kf ------


def wx_sign(token: str, timestamp: str, nonce: str, encrypt: str) -> str:
    return hashlib.sha1("".join(sorted([token, timestamp, nonce, encrypt])).encode()).hexdigest()


def wx_encrypt(plain: str, *, key43: str = ENCODING_AES_KEY, receive_id: str = CORP_ID) -> str:
    key = base64.b64decode(key43 + "=")
    body = plain.encode()
    data = os.urandom(16) + struct.pack(">I", len(body)) + body + receive_id.encode()
    n = 32 - len(data) % 32
    data += bytes([n]) * n
    enc = Cipher(algorithms.AES(key), modes.CBC(key[:16])).encryptor()
    return base64.b64encode(enc.update(data) + enc.finalize()).decode()


def wx_decrypt(encrypt: str, *, key43: str = ENCODING_AES_KEY) -> tuple[str, str]:
    """(message, receive id)."""
    key = base64.b64decode(key43 + "=")
    dec = Cipher(algorithms.AES(key), modes.CBC(key[:16])).decryptor()
    data = dec.update(base64.b64decode(encrypt)) + dec.finalize()
    data = data[: -data[-1]]
    (length,) = struct.unpack(">I", data[16:20])
    return data[20 : 20 + length].decode(), data[20 + length :].decode()


def _cdata(value: str) -> str:
    return f"<![CDATA[{value}]]>"


_ENDLESS = {"Content-Disposition": 'attachment; filename="endless.bin"'}


@dataclass
class SentMessage:
    touser: str
    open_kfid: str
    text: str
    msgid: str


@dataclass
class _Customer:
    last_message_at: float = 0.0
    sent_since: int = 0


@dataclass
class FakeWecomKf:
    page_size: int = 100
    corp_id: str = CORP_ID
    secret: str = SECRET
    sent: list[SentMessage] = field(default_factory=list)
    refused_sends: list[tuple[str, int]] = field(default_factory=list)  # (text, errcode)
    sync_requests: list[dict[str, Any]] = field(default_factory=list)
    token_requests: int = 0
    media: dict[str, tuple[bytes, str, str]] = field(default_factory=dict)  # id → data, mime, name
    streamed_media: dict[str, StreamedBody] = field(default_factory=dict)
    protocol_errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._changed = asyncio.Condition()
        self._log: list[dict[str, Any]] = []
        self._valid_tokens: set[str] = set()
        self._expired_tokens: set[str] = set()
        self._callback_tokens: set[str] = set()
        self._customers: dict[tuple[str, str], _Customer] = {}
        self._failures: list[tuple[str, int]] = []
        self._ids = itertools.count(1)
        self._media_gate = asyncio.Event()
        self._media_gate.set()
        self.media_waiting = 0
        self._runner: web.AppRunner | None = None
        self.base_url = ""

    async def __aenter__(self) -> Self:
        app = web.Application()
        app.router.add_get("/cgi-bin/gettoken", self._gettoken)
        app.router.add_post("/cgi-bin/kf/sync_msg", self._sync_msg)
        app.router.add_post("/cgi-bin/kf/send_msg", self._send_msg)
        app.router.add_get("/cgi-bin/media/get", self._media_get)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.base_url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._media_gate.set()
        if self._runner is not None:
            await self._runner.cleanup()

    def settings(self, **extra: Any) -> dict[str, Any]:
        """The `channels.wecom_kf` section pointing at this fake."""
        return {
            "enabled": True,
            "corp_id": self.corp_id,
            "secret": self.secret,
            "token": CALLBACK_TOKEN,
            "encoding_aes_key": ENCODING_AES_KEY,
            "api_base": self.base_url,
            "sync_retry_secs": 0.05,
            # the tests write messages just before the channel starts, and expect
            # them answered; a test of the first pull's backlog sets its own
            "backlog_secs": 60,
            **extra,
        }

    # -- test controls -----------------------------------------------------------

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(predicate)

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    def add_message(
        self,
        user: str,
        text: str = "",
        *,
        origin: int = 3,
        msgtype: str = "text",
        open_kfid: str = OPEN_KFID,
        body: dict[str, Any] | None = None,
        send_time: float | None = None,
    ) -> str:
        """Append one item to the message log; a customer message opens their send window."""
        msgid = f"msg{next(self._ids):06d}"
        at = time.time() if send_time is None else send_time
        item: dict[str, Any] = {
            "msgid": msgid,
            "open_kfid": open_kfid,
            "external_userid": user,
            "send_time": int(at),
            "origin": origin,
            "msgtype": msgtype,
            msgtype: body if body is not None else {"content": text},
        }
        self._log.append(item)
        if origin == 3:
            self._customers[(open_kfid, user)] = _Customer(last_message_at=at)
        return msgid

    def add_event(self, event_type: str, user: str, **details: str) -> str:
        msgid = f"evt{next(self._ids):06d}"
        body = {"event_type": event_type, "open_kfid": OPEN_KFID, "external_userid": user}
        self._log.append(
            {
                "msgid": msgid,
                "send_time": int(time.time()),
                "origin": 4,
                "msgtype": "event",
                "event": {**body, **details},
            }
        )
        return msgid

    def add_raw(self, item: dict[str, Any]) -> None:
        """Append an item as given, e.g. one WeCom's own schema would not produce."""
        self._log.append(item)

    def replay(self, msgid: str) -> None:
        """WeCom serves an item again (the same msgid) after the current end of the log."""
        item = next(i for i in self._log if i["msgid"] == msgid)
        self._log.append(dict(item))

    def add_media(self, media_id: str, data: bytes, mime: str, name: str) -> None:
        self.media[media_id] = (data, mime, name)

    def add_streamed_media(self, media_id: str, total: int) -> StreamedBody:
        self.streamed_media[media_id] = streamed = StreamedBody(total)
        return streamed

    def hold_media(self) -> None:
        self._media_gate.clear()

    def release_media(self) -> None:
        self._media_gate.set()

    def expire_tokens(self) -> None:
        self._expired_tokens |= self._valid_tokens
        self._valid_tokens.clear()

    def fail_next(self, endpoint: str, errcode: int) -> None:
        self._failures.append((endpoint, errcode))

    @property
    def sent_texts(self) -> list[str]:
        return [m.text for m in self.sent]

    # -- the callback sender -----------------------------------------------------

    async def notify(
        self,
        url: str,
        *,
        open_kfid: str = OPEN_KFID,
        token: str | None = None,
        bad_signature: bool = False,
        bad_ciphertext: bool = False,
        receive_id: str | None = None,
        timestamp: float | None = None,
        event: str = "kf_msg_or_event",
    ) -> tuple[int, str]:
        """POST a `kf_msg_or_event` notice as WeCom does; (status, body text).
        Another `event` (e.g. "change_external_contact", which the same
        callback URL receives for the corp's contacts) carries that event's
        fields instead of a token."""
        token = token or f"ENC{secrets.token_hex(8)}"
        self._callback_tokens.add(token)
        now = str(int(time.time() if timestamp is None else timestamp))
        if event == "kf_msg_or_event":
            fields = f"<Token>{_cdata(token)}</Token><OpenKfId>{_cdata(open_kfid)}</OpenKfId>"
        else:
            fields = (
                f"<ChangeType>{_cdata('add_external_contact')}</ChangeType>"
                f"<UserID>{_cdata('zhangsan')}</UserID>"
                f"<ExternalUserID>{_cdata('wmExternal')}</ExternalUserID>"
            )
        inner = (
            f"<xml><ToUserName>{_cdata(self.corp_id)}</ToUserName><CreateTime>{now}</CreateTime>"
            f"<MsgType>{_cdata('event')}</MsgType><Event>{_cdata(event)}</Event>{fields}</xml>"
        )
        encrypt = wx_encrypt(inner, receive_id=receive_id or self.corp_id)
        if bad_ciphertext:
            raw = bytearray(base64.b64decode(encrypt))
            raw[-1] ^= 0xFF  # the padding no longer checks out
            encrypt = base64.b64encode(bytes(raw)).decode()
        nonce = str(secrets.randbelow(10**9))
        sig = wx_sign(CALLBACK_TOKEN, now, nonce, encrypt)
        if bad_signature:
            sig = "0" * 40
        body = (
            f"<xml><ToUserName>{_cdata(self.corp_id)}</ToUserName>"
            f"<Encrypt>{_cdata(encrypt)}</Encrypt><AgentID>{_cdata('')}</AgentID></xml>"
        )
        params = {"msg_signature": sig, "timestamp": now, "nonce": nonce}
        async with (
            aiohttp.ClientSession() as http,
            http.post(url, params=params, data=body.encode()) as resp,
        ):
            return resp.status, await resp.text()

    async def verify_url(
        self,
        url: str,
        echo: str,
        *,
        bad_signature: bool = False,
        receive_id: str | None = None,
        encrypt: str | None = None,
        timestamp: float | None = None,
    ) -> tuple[int, str]:
        """The GET WeCom sends when the callback URL is saved; (status, body text)."""
        echostr = encrypt or wx_encrypt(echo, receive_id=receive_id or self.corp_id)
        now = str(int(time.time() if timestamp is None else timestamp))
        nonce = str(secrets.randbelow(10**9))
        sig = "f" * 40 if bad_signature else wx_sign(CALLBACK_TOKEN, now, nonce, echostr)
        params = {"msg_signature": sig, "timestamp": now, "nonce": nonce, "echostr": echostr}
        async with aiohttp.ClientSession() as http, http.get(url, params=params) as resp:
            return resp.status, await resp.text()

    # -- qyapi -------------------------------------------------------------------

    def _injected(self, endpoint: str) -> int | None:
        for i, (name, code) in enumerate(self._failures):
            if name == endpoint:
                del self._failures[i]
                return code
        return None

    def _token_error(self, request: web.Request) -> web.Response | None:
        token = request.query.get("access_token", "")
        if not token:
            return web.json_response({"errcode": 41001, "errmsg": "access_token missing"})
        if token in self._expired_tokens:
            return web.json_response({"errcode": 42001, "errmsg": "access_token expired"})
        if token not in self._valid_tokens:
            return web.json_response({"errcode": 40014, "errmsg": "invalid access_token"})
        return None

    async def _gettoken(self, request: web.Request) -> web.Response:
        self.token_requests += 1
        q = request.query
        if q.get("corpid") != self.corp_id:
            return web.json_response({"errcode": 40013, "errmsg": "invalid corpid"})
        if q.get("corpsecret") != self.secret:
            return web.json_response({"errcode": 40001, "errmsg": "invalid credential"})
        token = f"AT{secrets.token_hex(12)}"
        self._valid_tokens.add(token)
        return web.json_response(
            {"errcode": 0, "errmsg": "ok", "access_token": token, "expires_in": 7200}
        )

    async def _json_body(self, request: web.Request, endpoint: str) -> dict[str, Any] | None:
        if request.content_type != "application/json":
            self.protocol_errors.append(f"{endpoint}: content type {request.content_type}")
        try:
            body = json.loads(await request.read())
        except ValueError:
            self.protocol_errors.append(f"{endpoint}: body is not JSON")
            return None
        return body if isinstance(body, dict) else None

    async def _sync_msg(self, request: web.Request) -> web.Response:
        if (refused := self._token_error(request)) is not None:
            return refused
        body = await self._json_body(request, "kf/sync_msg")
        if body is None:
            return web.json_response({"errcode": 47001, "errmsg": "data format error"})
        self.sync_requests.append(body)
        if (code := self._injected("kf/sync_msg")) is not None:
            return web.json_response({"errcode": code, "errmsg": f"injected {code}"})
        limit = body.get("limit", 1000)
        if not isinstance(limit, int) or not 1 <= limit <= 1000:
            self.protocol_errors.append(f"kf/sync_msg: limit {limit!r}")
        token = body.get("token")
        if token is not None and token not in self._callback_tokens:
            return web.json_response({"errcode": 95007, "errmsg": "invalid msg token"})
        kfid = body.get("open_kfid")
        cursor = str(body.get("cursor") or "")
        start = int(cursor.removeprefix("c")) if cursor.startswith("c") else 0
        if cursor and not cursor.startswith("c"):
            return web.json_response({"errcode": 95011, "errmsg": "invalid cursor"})
        mine = [
            (n, item)
            for n, item in enumerate(self._log)
            if n >= start and (not kfid or item.get("open_kfid", OPEN_KFID) == kfid)
        ]
        page = mine[: min(int(limit), self.page_size)]
        end = page[-1][0] + 1 if page else max(start, 0)
        await self._notify()
        return web.json_response(
            {
                "errcode": 0,
                "errmsg": "ok",
                "next_cursor": f"c{end}",
                "has_more": 1 if len(mine) > len(page) else 0,
                "msg_list": [item for _, item in page],
            }
        )

    async def _send_msg(self, request: web.Request) -> web.Response:
        if (refused := self._token_error(request)) is not None:
            return refused
        body = await self._json_body(request, "kf/send_msg")
        if body is None:
            return web.json_response({"errcode": 47001, "errmsg": "data format error"})
        touser, kfid = str(body.get("touser") or ""), str(body.get("open_kfid") or "")
        text = str((body.get("text") or {}).get("content") or "")
        if body.get("msgtype") != "text" or not touser or not kfid or not text:
            self.protocol_errors.append(f"kf/send_msg: bad body {sorted(body)}")
            return web.json_response({"errcode": 40008, "errmsg": "invalid message type"})
        if len(text.encode()) > MAX_TEXT_BYTES:
            self.protocol_errors.append(f"kf/send_msg: {len(text.encode())} bytes of text")
            return web.json_response({"errcode": 44004, "errmsg": "text content too long"})
        msgid = str(body.get("msgid") or f"out{next(self._ids):06d}")
        if (code := self._injected("kf/send_msg")) is not None:
            self.refused_sends.append((text, code))
            await self._notify()
            return web.json_response({"errcode": code, "errmsg": f"injected {code}"})
        customer = self._customers.get((kfid, touser))
        if (
            customer is None
            or time.time() - customer.last_message_at > WINDOW_SECS
            or customer.sent_since >= WINDOW_MESSAGES
        ):
            self.refused_sends.append((text, 95001))
            await self._notify()
            return web.json_response({"errcode": 95001, "errmsg": "send msg count limit"})
        customer.sent_since += 1
        self.sent.append(SentMessage(touser, kfid, text, msgid))
        await self._notify()
        return web.json_response({"errcode": 0, "errmsg": "ok", "msgid": msgid})

    async def _media_get(self, request: web.Request) -> web.StreamResponse:
        if (refused := self._token_error(request)) is not None:
            return refused
        self.media_waiting += 1
        await self._notify()
        await self._media_gate.wait()
        self.media_waiting -= 1
        streamed = self.streamed_media.get(request.query.get("media_id", ""))
        if streamed is not None:
            return await stream_body(request, streamed, _ENDLESS)
        item = self.media.get(request.query.get("media_id", ""))
        if item is None:
            return web.json_response({"errcode": 40007, "errmsg": "invalid media_id"})
        data, mime, name = item
        headers = {"Content-Disposition": f'attachment; filename="{name}"'}
        return web.Response(body=data, content_type=mime, headers=headers)
