"""A local fake of Tencent's iLink bot API (and its CDN) for the WeChat channel tests.

Speaks the wire described in PROTOCOLS.md §WeChat iLink on 127.0.0.1: QR login
(scripted statuses incl. expired and both redirects, a second listening host to
redirect to), the getupdates long poll with an opaque cursor and deliberate
replays, sendmessage with ret codes and context_token checks (a send without the
user's latest token is "silently discarded": ret 0, recorded in `discarded`),
getconfig/sendtyping, notifystart/stop, and CDN downloads encrypted with
AES-128-ECB, voice notes among them as real SILK v3 (`silk_tone`, encoded by
the same library the channel decodes with, in WeChat's variant with the 0x02
byte). Header or body violations are collected in `protocol_errors`.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import json
import math
import secrets
import struct
import time
import wave
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import pysilk
from aiohttp import web
from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
KeyFormat = Literal["base64_raw", "base64_hex", "hex_aeskey", "none"]

EXPECTED_VERSION = str((2 << 16) | (4 << 8) | 9)


def aes_ecb_decrypt(data: bytes, key: bytes) -> bytes:
    decryptor = Cipher(algorithms.AES(key), modes.ECB()).decryptor()
    padded = decryptor.update(data) + decryptor.finalize()
    unpadder = padding.PKCS7(128).unpadder()
    return unpadder.update(padded) + unpadder.finalize()


def aes_ecb_encrypt(data: bytes, key: bytes) -> bytes:
    padder = padding.PKCS7(128).padder()
    padded = padder.update(data) + padder.finalize()
    encryptor = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    return encryptor.update(padded) + encryptor.finalize()


def silk_tone(seconds: float = 1.0, hz: float = 440.0, rate: int = 24_000) -> bytes:
    """A sine tone as WeChat sends voice notes: SILK v3, Tencent's variant."""
    frames = int(seconds * rate)
    pcm = b"".join(
        struct.pack("<h", int(8000 * math.sin(2 * math.pi * hz * n / rate))) for n in range(frames)
    )
    out = io.BytesIO()
    pysilk.encode(io.BytesIO(pcm), out, rate, 24_000, tencent=True)
    return out.getvalue()


def silk_as_wav(silk: bytes, rate: int = 16_000) -> bytes:
    """What a speech-to-text endpoint should get for `silk`: 16-bit mono WAV."""
    pcm = io.BytesIO()
    pysilk.decode(io.BytesIO(silk), pcm, rate)
    out = io.BytesIO()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(rate)
        wav.writeframes(pcm.getvalue())
    return out.getvalue()


@dataclass
class SentMessage:
    to_user_id: str
    client_id: str
    text: str
    context_token: str | None
    message_id: str


@dataclass
class FakeWechat:
    token: str = field(default_factory=lambda: "ilinkbot_" + secrets.token_hex(8))
    bot_id: str = "bot123@im.bot"
    owner_id: str = "owner@im.wechat"
    hold_secs: float = 2.0
    send_delay_secs: float = 0.0  # sendmessage answers this late (a slow platform)
    max_text: int = 4000
    qr_get_only: bool = False
    # One entry per get_qrcode_status call (the last one repeats).
    login_script: list[str | dict[str, Any]] = field(default_factory=lambda: ["confirmed"])
    # context tokens: a send on one older than `context_ttl_secs` (by `clock`)
    # or past `sends_per_token` sends is refused with ret -2, as iLink does
    clock: Callable[[], float] = time.time
    context_ttl_secs: float = 120.0
    sends_per_token: int = 10

    def __post_init__(self) -> None:
        self.base_url = ""
        self.alt_host = ""
        self.protocol_errors: list[str] = []
        self.qr_requests: list[tuple[str, str]] = []  # (method, host)
        self.status_requests: list[dict[str, str]] = []
        self.stream: list[dict[str, Any]] = []
        self.updates_requests: list[str] = []  # cursors received
        self.scripted_updates: list[dict[str, Any]] = []
        self.stall_updates = 0  # this many getupdates calls never answer (until shutdown)
        self.sent: list[SentMessage] = []
        self.discarded: list[SentMessage] = []
        self.send_attempts: list[dict[str, Any]] = []
        self.send_rets: list[dict[str, Any]] = []
        # sends whose client_id was seen before: iLink answers ret 0 and shows nothing
        self.duplicates: list[SentMessage] = []
        self._client_ids: dict[str, str] = {}
        self.latest_tokens: dict[str, str] = {}
        self.token_issued: dict[str, float] = {}  # context token → when (clock)
        self.token_sends: dict[str, int] = {}
        self.refused: list[SentMessage] = []  # sends answered ret -2 (token expired/used up)
        self.typing: list[tuple[str, int]] = []
        self.tickets_issued: list[str] = []
        self.notifications: list[str] = []
        self.cdn: dict[str, bytes] = {}
        self.cdn_requests: list[str] = []
        self.upload_slots: dict[str, dict[str, Any]] = {}  # upload_param -> getuploadurl body
        self.upload_requests: list[str] = []  # filekeys, one per getuploadurl
        self.uploaded: dict[str, dict[str, Any]] = {}  # download param -> cipher, md5
        self.cdn_uploads: list[str] = []
        self.received_files: list[bytes] = []  # decrypted bytes of media items sent
        self.swallow_media_sends = False  # media sends taken, never answered
        self.swallowed: list[str] = []
        self.retired_tokens: list[str] = []  # expired by `expire_session`
        self.qr_token_lists: list[list[str]] = []  # local_token_list of each POST
        self._status_index = 0
        self._qr_count = 0
        self._next_id = 7_000_000_000_000_000_000
        self._changed = asyncio.Condition()
        self._closing = False
        self._runner: web.AppRunner | None = None

    # -- lifecycle ---------------------------------------------------------------

    async def __aenter__(self) -> FakeWechat:
        app = web.Application()
        r = app.router
        r.add_route("*", "/ilink/bot/get_bot_qrcode", self._get_bot_qrcode)
        r.add_get("/ilink/bot/get_qrcode_status", self._get_qrcode_status)
        r.add_post("/ilink/bot/getupdates", self._authed(self._getupdates))
        r.add_post("/ilink/bot/sendmessage", self._authed(self._sendmessage))
        r.add_post("/ilink/bot/getconfig", self._authed(self._getconfig))
        r.add_post("/ilink/bot/sendtyping", self._authed(self._sendtyping))
        r.add_post("/ilink/bot/msg/notifystart", self._authed(self._notify("start")))
        r.add_post("/ilink/bot/msg/notifystop", self._authed(self._notify("stop")))
        r.add_get("/c2c/download", self._cdn_download)
        r.add_post("/ilink/bot/getuploadurl", self._authed(self._getuploadurl))
        r.add_post("/c2c/upload", self._cdn_upload)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        for _ in range(2):
            await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        ports = [addr[1] for addr in self._runner.addresses]
        self.base_url = f"http://127.0.0.1:{ports[0]}"
        self.alt_host = f"127.0.0.1:{ports[1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        async with self._changed:
            self._closing = True
            self._changed.notify_all()
        assert self._runner is not None
        await self._runner.cleanup()

    @property
    def cdn_base_url(self) -> str:
        return f"{self.base_url}/c2c"

    # -- test controls -----------------------------------------------------------

    async def add_message(
        self,
        from_user: str,
        text: str | None = "hi",
        *,
        items: list[dict[str, Any]] | None = None,
        message_id: str | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """Queue a user message (with a fresh context_token) for getupdates."""
        self._next_id += 1
        token = self._issue_token(from_user)
        item_list = items if items is not None else [{"type": 1, "text_item": {"text": text}}]
        msg: dict[str, Any] = {
            "seq": len(self.stream) + 1,
            "message_id": str(self._next_id) if message_id is None else message_id,
            "from_user_id": from_user,
            "to_user_id": self.bot_id,
            "client_id": f"wx-{self._next_id}",
            "create_time_ms": 1_760_000_000_000 + self._next_id % 1_000_000,
            "session_id": "",
            "message_type": 1,
            "message_state": 2,
            "item_list": item_list,
            "context_token": token,
            **extra,
        }
        await self._append(msg)
        return msg

    def expire_session(self) -> None:
        """The bot's session ends: the current token answers -14 from now on, a
        login names it in local_token_list at its peril (ret -3) and a
        confirmed login issues a new token."""
        self.retired_tokens.append(self.token)
        self.token = "ilinkbot_" + secrets.token_hex(8)

    def _issue_token(self, user: str) -> str:
        token = f"ctx-{user}-{secrets.token_hex(4)}"
        self.latest_tokens[user] = token
        self.token_issued[token] = self.clock()
        return token

    async def replay(self, msg: dict[str, Any]) -> None:
        """Deliver an already delivered message again (at-least-once delivery)."""
        await self._append(dict(msg))

    async def script_updates(self, response: dict[str, Any]) -> None:
        """The next getupdates answers `response` verbatim (e.g. ret -14)."""
        async with self._changed:
            self.scripted_updates.append(response)
            self._changed.notify_all()

    def add_cdn_file(self, data: bytes, key_format: KeyFormat = "base64_raw") -> dict[str, Any]:
        """Store `data` encrypted on the CDN; returns the item fields that reference it."""
        key = secrets.token_bytes(16)
        param = secrets.token_urlsafe(24)
        media: dict[str, Any] = {"encrypt_query_param": param, "encrypt_type": 1}
        extra: dict[str, Any] = {}
        if key_format == "none":
            self.cdn[param] = data
            return {"media": media}
        self.cdn[param] = aes_ecb_encrypt(data, key)
        if key_format == "base64_raw":
            media["aes_key"] = base64.b64encode(key).decode()
        elif key_format == "base64_hex":
            media["aes_key"] = base64.b64encode(key.hex().encode()).decode()
        else:
            extra["aeskey"] = key.hex()
            media["aes_key"] = base64.b64encode(secrets.token_bytes(16)).decode()  # must lose
        return {"media": media, **extra}

    def add_voice_note(
        self, audio: bytes, *, text: str | None = None, encode_type: int = 6
    ) -> dict[str, Any]:
        """A voice item (type 3) whose audio is on the CDN; `text` is WeChat's
        own transcript, which iLink sends with some notes."""
        voice: dict[str, Any] = {
            **self.add_cdn_file(audio),
            "encode_type": encode_type,
            "bits_per_sample": 16,
            "sample_rate": 24_000,
            "playtime": 1000,
        }
        if text is not None:
            voice["text"] = text
        return {"type": 3, "voice_item": voice}

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 5.0) -> None:
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(predicate)

    async def _append(self, msg: dict[str, Any]) -> None:
        async with self._changed:
            self.stream.append(msg)
            self._changed.notify_all()

    async def _changed_now(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    # -- helpers -------------------------------------------------------------------

    def _check_common_headers(self, request: web.Request) -> None:
        h = request.headers
        if h.get("iLink-App-Id") != "bot":
            self.protocol_errors.append(f"{request.path}: iLink-App-Id={h.get('iLink-App-Id')}")
        if h.get("iLink-App-ClientVersion") != EXPECTED_VERSION:
            self.protocol_errors.append(f"{request.path}: bad iLink-App-ClientVersion")

    def _check_auth_headers(self, request: web.Request) -> None:
        h = request.headers
        try:
            uin = base64.b64decode(h.get("X-WECHAT-UIN", ""), validate=True).decode()
            if not uin.isdigit() or int(uin) >= 2**32:
                raise ValueError(uin)
        except ValueError:
            self.protocol_errors.append(f"{request.path}: bad X-WECHAT-UIN")

    def _authed(
        self, handler: Callable[[web.Request, dict[str, Any]], Awaitable[dict[str, Any]]]
    ) -> Handler:
        async def wrapped(request: web.Request) -> web.StreamResponse:
            self._check_common_headers(request)
            self._check_auth_headers(request)
            h = request.headers
            if h.get("AuthorizationType") != "ilink_bot_token":
                self.protocol_errors.append(f"{request.path}: AuthorizationType missing")
            if h.get("Content-Type", "").split(";")[0] != "application/json":
                self.protocol_errors.append(f"{request.path}: Content-Type not JSON")
            try:
                body = json.loads(await request.read())
            except ValueError:
                return web.Response(status=400, text="bad json")
            info = body.get("base_info")
            if not isinstance(info, dict) or "channel_version" not in info:
                self.protocol_errors.append(f"{request.path}: base_info missing")
            if h.get("Authorization") != f"Bearer {self.token}":
                return web.json_response({"ret": -14, "errcode": -14, "errmsg": "session timeout"})
            return web.json_response(await handler(request, body))

        return wrapped

    # -- login ---------------------------------------------------------------------

    async def _get_bot_qrcode(self, request: web.Request) -> web.StreamResponse:
        self._check_common_headers(request)
        if request.query.get("bot_type") != "3":
            self.protocol_errors.append("get_bot_qrcode: bot_type != 3")
        if request.method not in ("GET", "POST"):
            raise web.HTTPMethodNotAllowed(request.method, ["GET", "POST"])
        if request.method == "POST" and self.qr_get_only:
            raise web.HTTPMethodNotAllowed("POST", ["GET"])
        if {"Authorization", "X-WECHAT-UIN"} & set(request.headers):
            self.protocol_errors.append("get_bot_qrcode: sent bot-call headers")
        self.qr_requests.append((request.method, request.host))
        if request.method == "POST":
            tokens = (await request.json()).get("local_token_list") or []
            self.qr_token_lists.append(list(tokens))
            if set(tokens) & set(self.retired_tokens):
                return web.json_response({"ret": -3, "errmsg": "invalid local token"})
        self._qr_count += 1
        qr_id = f"qr-{self._qr_count}"
        return web.json_response(
            {"qrcode": qr_id, "qrcode_img_content": f"https://liteapp.weixin.qq.com/q/{qr_id}"}
        )

    async def _get_qrcode_status(self, request: web.Request) -> web.StreamResponse:
        self._check_common_headers(request)
        if {"Authorization", "X-WECHAT-UIN"} & set(request.headers):
            self.protocol_errors.append("get_qrcode_status: sent bot-call headers")
        self.status_requests.append(
            {
                "host": request.host,
                "qrcode": request.query.get("qrcode", ""),
                "verify_code": request.query.get("verify_code", ""),
            }
        )
        step = self.login_script[min(self._status_index, len(self.login_script) - 1)]
        self._status_index += 1
        reply = {"status": step} if isinstance(step, str) else dict(step)
        if reply["status"] == "confirmed":
            reply.update(
                bot_token=self.token,
                ilink_bot_id=self.bot_id,
                baseurl=self.base_url,
                ilink_user_id=self.owner_id,
            )
        elif reply["status"] == "scaned_but_redirect":
            reply.setdefault("redirect_host", self.alt_host)
        return web.json_response(reply)

    # -- messaging -------------------------------------------------------------------

    async def _getupdates(self, request: web.Request, body: dict[str, Any]) -> dict[str, Any]:
        cursor = str(body.get("get_updates_buf", ""))
        self.updates_requests.append(cursor)
        await self._changed_now()
        start = int(cursor.removeprefix("buf-")) if cursor.startswith("buf-") else 0
        if self.stall_updates > 0:
            self.stall_updates -= 1
            async with self._changed:
                await self._changed.wait_for(lambda: self._closing)
            return {"ret": 0, "msgs": [], "get_updates_buf": cursor}
        try:
            async with asyncio.timeout(self.hold_secs), self._changed:
                await self._changed.wait_for(
                    lambda: self._closing or bool(self.scripted_updates) or len(self.stream) > start
                )
        except TimeoutError:
            pass
        if self.scripted_updates:
            return self.scripted_updates.pop(0)
        msgs = self.stream[start:]
        return {
            "ret": 0,
            "msgs": msgs,
            "get_updates_buf": f"buf-{start + len(msgs)}",
            "longpolling_timeout_ms": int(self.hold_secs * 1000),
        }

    async def _sendmessage(self, request: web.Request, body: dict[str, Any]) -> dict[str, Any]:
        msg = body.get("msg") or {}
        self.send_attempts.append(msg)
        if self.send_delay_secs:
            await asyncio.sleep(self.send_delay_secs)
        if self.send_rets:
            return self.send_rets.pop(0)
        items = msg.get("item_list") or []
        bad_shape = (
            msg.get("message_type") != 2
            or msg.get("message_state") != 2
            or msg.get("from_user_id") != ""
            or not msg.get("client_id")
            or len(items) != 1
        )
        if bad_shape:
            self.protocol_errors.append(f"sendmessage: bad msg shape {msg!r}")
            return {"ret": -1, "errmsg": "bad request"}
        item = items[0]
        if item.get("type") in (2, 4):  # an image or a file: it must name a CDN upload
            text, problem = self._media_item(item)
            if problem is not None:
                self.protocol_errors.append(f"sendmessage: {problem}")
                return {"ret": -1, "errmsg": problem}
            if self.swallow_media_sends:
                self.received_files.pop()  # taken, never delivered
                self.swallowed.append(str(msg["client_id"]))
                await self._changed_now()
                async with self._changed:  # never answered: the sender is killed meanwhile
                    await self._changed.wait_for(lambda: self._closing)
                return {"ret": -1, "errmsg": "shutting down"}
        else:
            text = str((item.get("text_item") or {}).get("text") or "")
        if len(text) > self.max_text:
            return {"ret": -1, "errmsg": "text too long"}
        user = str(msg.get("to_user_id"))
        client_id = str(msg["client_id"])
        if client_id in self._client_ids:  # iLink's idempotency: a repeat is not shown again
            self.duplicates.append(SentMessage(user, client_id, text, msg.get("context_token"), ""))
            await self._changed_now()
            return {"ret": 0, "message_id": self._client_ids[client_id]}
        self._next_id += 1
        sent = SentMessage(user, client_id, text, msg.get("context_token"), str(self._next_id))
        self._client_ids[client_id] = sent.message_id
        token = sent.context_token or ""
        if not token or token != self.latest_tokens.get(user):
            self.discarded.append(sent)  # the real server drops it without saying so
        elif (
            self.clock() - self.token_issued.get(token, 0.0) > self.context_ttl_secs
            or self.token_sends.get(token, 0) >= self.sends_per_token
        ):
            del self._client_ids[client_id]  # refused, not delivered: it may come again
            self.refused.append(sent)
            await self._changed_now()
            return {"ret": -2, "errmsg": "context restricted"}
        else:
            self.token_sends[token] = self.token_sends.get(token, 0) + 1
            self.sent.append(sent)
        await self._changed_now()
        return {"ret": 0, "message_id": sent.message_id}

    def _media_item(self, item: dict[str, Any]) -> tuple[str, str | None]:
        """("[image <name>]" or "[file <name>]", None) for an item naming an upload
        that decrypts with its key; else ("", what is wrong)."""
        image = item["type"] == 2
        body = item.get("image_item" if image else "file_item") or {}
        media = body.get("media") or {}
        upload = self.uploaded.get(str(media.get("encrypt_query_param", "")))
        if upload is None:
            return "", "media item names no upload"
        try:
            key = bytes.fromhex(base64.b64decode(str(media.get("aes_key", ""))).decode())
            plain = aes_ecb_decrypt(upload["cipher"], key)
        except ValueError:
            return "", "media item key does not decrypt the upload"
        if hashlib.md5(plain, usedforsecurity=False).hexdigest() != upload["rawfilemd5"]:
            return "", "media item key does not decrypt the upload"
        name = str(body.get("file_name") or "")
        if not image and (not name or body.get("len") != str(len(plain))):
            return "", "file item without file_name or len"
        self.received_files.append(plain)
        return f"[{'image' if image else 'file'} {name}]".replace(" ]", "]"), None

    async def _getuploadurl(self, request: web.Request, body: dict[str, Any]) -> dict[str, Any]:
        needed = ("filekey", "media_type", "to_user_id", "rawsize", "rawfilemd5", "filesize")
        if any(body.get(k) in (None, "") for k in needed) or len(str(body.get("aeskey"))) != 32:
            self.protocol_errors.append(f"getuploadurl: missing fields {body!r}")
            return {"ret": -1, "errmsg": "bad request"}
        param = "up-" + secrets.token_hex(8)
        self.upload_slots[param] = dict(body)
        self.upload_requests.append(str(body["filekey"]))
        await self._changed_now()
        return {"ret": 0, "upload_param": param}

    async def _cdn_upload(self, request: web.Request) -> web.StreamResponse:
        slot = self.upload_slots.get(request.query.get("encrypted_query_param", ""))
        data = await request.read()
        if slot is None or request.query.get("filekey") != slot["filekey"]:
            return web.Response(status=400, text="unknown upload")
        if len(data) != int(slot["filesize"]):
            return web.Response(status=400, text="size differs from getuploadurl")
        download = "dl-" + secrets.token_hex(8)
        self.uploaded[download] = {"cipher": data, "rawfilemd5": slot["rawfilemd5"]}
        self.cdn[download] = data  # downloadable like any CDN object
        self.cdn_uploads.append(download)
        await self._changed_now()
        return web.Response(status=200, headers={"x-encrypted-param": download})

    async def _getconfig(self, request: web.Request, body: dict[str, Any]) -> dict[str, Any]:
        user = str(body.get("ilink_user_id", ""))
        if body.get("context_token") != self.latest_tokens.get(user):
            self.protocol_errors.append("getconfig: context_token is not the latest")
        ticket = f"ticket-{user}-{len(self.tickets_issued)}"
        self.tickets_issued.append(ticket)
        answer: dict[str, Any] = {"ret": 0, "typing_ticket": ticket}
        if user in self.latest_tokens:  # a fresh context token, with new age and budget
            answer["context_token"] = self._issue_token(user)
        return answer

    async def _sendtyping(self, request: web.Request, body: dict[str, Any]) -> dict[str, Any]:
        if body.get("typing_ticket") not in self.tickets_issued:
            return {"ret": -1, "errmsg": "bad ticket"}
        self.typing.append((str(body.get("ilink_user_id")), int(body.get("status", 0))))
        await self._changed_now()
        return {"ret": 0}

    def _notify(
        self, what: str
    ) -> Callable[[web.Request, dict[str, Any]], Awaitable[dict[str, Any]]]:
        async def handler(request: web.Request, body: dict[str, Any]) -> dict[str, Any]:
            self.notifications.append(what)
            await self._changed_now()
            return {"ret": 0}

        return handler

    async def _cdn_download(self, request: web.Request) -> web.StreamResponse:
        param = request.query.get("encrypted_query_param", "")
        self.cdn_requests.append(param)
        data = self.cdn.get(param)
        if data is None:
            return web.Response(status=404)
        return web.Response(body=data, content_type="application/octet-stream")
