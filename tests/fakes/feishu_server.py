"""A fake Feishu Open Platform on 127.0.0.1: Open API, event sender and long connection.

`FakeFeishu` serves, on one aiohttp app (port 0):
- the Open API: tenant token, bot info, send, reply, get message, reactions
  add/remove, resource download; injected failures (`fail_next`) for rate limits;
  an outage (`start_outage` … `end_outage`: HTTP 502 with an HTML page for
  matching calls, each recorded in `refused`);
- the long connection: POST /callback/ws/endpoint and a websocket at /ws speaking
  protobuf `pbbp2.Frame`s (pong for ping with the ClientConfig, events pushed
  in `chunks`, acks recorded); `go_silent()` makes the current connection stop
  answering pings and sending without closing it; `reject_handshake` refuses it.
`EventSender` POSTs events to a webhook URL: plain, encrypted, signed, replayed.
Builders (`message_event`, `encrypt`) produce the real wire shapes.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import itertools
import json
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Self

import aiohttp
from aiohttp import web
from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from channels.feishu.longconn import load_frame_class

APP_ID = "cli_fake_app"
APP_SECRET = "fake-app-secret"
BOT_OPEN_ID = "ou_bot"
VERIFICATION_TOKEN = "verify-token"
ENCRYPT_KEY = "fake encrypt key"
# upload caps, code 234006 past them (https://open.feishu.cn/document/server-docs/im-v1/image/create,
# …/im-v1/file/create)
IMAGE_MAX = 10 * 1024 * 1024
FILE_MAX = 30 * 1024 * 1024


@dataclass
class Sent:
    kind: str  # "send" | "reply"
    target: str  # receive_id, or the message replied to
    id_type: str | None
    msg_type: str
    content: dict[str, Any]
    uuid: str | None
    message_id: str

    @property
    def text(self) -> str:
        if self.msg_type == "text":
            return str(self.content.get("text", ""))
        if self.msg_type == "interactive":  # a card: the text of its elements
            texts = [
                el["content"]
                if el.get("tag") == "markdown"
                else el.get("text", {}).get("content", "")
                for el in self.content["elements"]
            ]
            return "\n".join(texts)
        paragraphs = self.content.get("zh_cn", {}).get("content", [])
        return "\n".join("".join(el.get("text", "") for el in p) for p in paragraphs)


@dataclass
class _Conn:
    ws: web.WebSocketResponse
    silent: bool = False
    pings: int = 0


@dataclass
class FakeFeishu:
    ping_interval: int = 120
    token_expire: int = 7200
    bot_open_id: str = BOT_OPEN_ID
    sent: list[Sent] = field(default_factory=list)
    reactions: list[tuple[str, str, str]] = field(default_factory=list)  # (op, message_id, x)
    token_requests: int = 0
    resources: dict[tuple[str, str], tuple[bytes, str, str]] = field(default_factory=dict)
    messages: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    acks: dict[str, int] = field(default_factory=dict)  # frame message_id -> code
    connections: int = 0
    reject_handshake: dict[str, str] | None = None
    requests: list[tuple[str, str]] = field(default_factory=list)
    patches: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (message id, card)
    refused: list[tuple[str, str]] = field(default_factory=list)  # calls an outage answered

    def __post_init__(self) -> None:
        self._changed = asyncio.Condition()
        self._failures: list[tuple[str, str, int, dict[str, Any]]] = []
        self._outage: tuple[str, str, int] | None = None
        self._tokens: set[str] = set()
        self._uuids: dict[str, str] = {}
        self.duplicates: list[str] = []  # uuids sent again: answered, not shown
        self.forwarded: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        self.uploads: dict[str, tuple[str, bytes]] = {}  # image_key / file_key -> (name, bytes)
        self.upload_requests: list[str] = []  # "image" / "file", one per upload made
        self.oversize_uploads: list[str] = []  # "image" / "file" uploads refused for their size
        # image/file sends are taken and never answered (the sender is killed meanwhile)
        self.swallow_media_sends = False
        self.swallowed: list[str] = []
        self._closing = asyncio.Event()
        self.reject_cards = False  # answer every interactive body as Feishu does a bad card
        self.rejected: list[tuple[str, str | None]] = []  # (msg_type, uuid) refused
        self._ids = itertools.count(1)
        self._conns: list[_Conn] = []
        self._runner: web.AppRunner | None = None
        self._frame: Any = None
        self.base_url = ""

    async def __aenter__(self) -> Self:
        self._frame = await load_frame_class()
        app = web.Application(client_max_size=FILE_MAX + (1 << 20))
        app.router.add_post("/open-apis/auth/v3/tenant_access_token/internal", self._token)
        app.router.add_get("/open-apis/bot/v3/info", self._bot_info)
        app.router.add_post("/open-apis/im/v1/messages", self._send)
        app.router.add_post("/open-apis/im/v1/images", self._upload_image)
        app.router.add_post("/open-apis/im/v1/files", self._upload_file)
        app.router.add_post("/open-apis/im/v1/messages/{mid}/reply", self._reply)
        app.router.add_get("/open-apis/im/v1/messages/{mid}", self._get_message)
        app.router.add_patch("/open-apis/im/v1/messages/{mid}", self._patch)
        app.router.add_post("/open-apis/im/v1/messages/{mid}/reactions", self._react)
        app.router.add_delete("/open-apis/im/v1/messages/{mid}/reactions/{rid}", self._unreact)
        app.router.add_get("/open-apis/im/v1/messages/{mid}/resources/{key}", self._resource)
        app.router.add_post("/callback/ws/endpoint", self._endpoint)
        app.router.add_get("/ws", self._ws)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.base_url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._closing.set()
        for conn in self._conns:
            await conn.ws.close()
        if self._runner is not None:
            await self._runner.cleanup()

    # -- test controls -------------------------------------------------------

    async def wait_until(self, predicate: Callable[[], bool], timeout: float = 5.0) -> None:
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(predicate)

    def fail_next(self, method: str, path_prefix: str, *, code: int, status: int = 200) -> None:
        """The next matching API call answers with Feishu error `code` (and HTTP status)."""
        body = {"code": code, "msg": f"injected error {code}"}
        self._failures.append((method, path_prefix, status, body))

    def start_outage(
        self,
        method: str = "POST",
        path_prefix: str = "/open-apis/im/v1/messages",
        status: int = 502,
    ) -> None:
        """Matching API calls fail with `status` and an HTML page until `end_outage`."""
        self._outage = (method, path_prefix, status)

    def end_outage(self) -> None:
        self._outage = None

    def add_resource(self, message_id: str, key: str, data: bytes, ctype: str, name: str) -> None:
        self.resources[(message_id, key)] = (data, ctype, name)

    def go_silent(self) -> None:
        """The live connection stops answering and sending, without closing."""
        for conn in self._conns:
            conn.silent = True

    @property
    def live_connections(self) -> int:
        return sum(1 for c in self._conns if not c.silent and not c.ws.closed)

    async def push_event(self, event: dict[str, Any], chunks: int = 1) -> str:
        """Send `event` over the (newest) live connection; returns the frame message_id."""
        await self.wait_until(lambda: self.live_connections > 0)
        conn = [c for c in self._conns if not c.silent and not c.ws.closed][-1]
        payload = json.dumps(event).encode()
        frame_id = uuid.uuid4().hex
        size = -(-len(payload) // chunks)
        for seq in range(chunks):
            frame = self._frame()
            frame.SeqID, frame.LogID, frame.service, frame.method = seq + 1, 0, 33, 1
            headers = {
                "type": "event",
                "message_id": frame_id,
                "trace_id": "trace-" + frame_id,
                "sum": str(chunks),
                "seq": str(seq),
            }
            for key, value in headers.items():
                header = frame.headers.add()
                header.key, header.value = key, value
            frame.payload = payload[seq * size : (seq + 1) * size]
            await conn.ws.send_bytes(frame.SerializeToString())
        return frame_id

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    # -- Open API ------------------------------------------------------------

    async def _guard(self, request: web.Request, auth: bool = True) -> web.Response | None:
        self.requests.append((request.method, request.path))
        if self._outage is not None:
            method, prefix, status = self._outage
            if request.method == method and request.path.startswith(prefix):
                self.refused.append((request.method, request.path))
                await self._notify()
                page = f"<html><body><h1>{status}</h1></body></html>"
                return web.Response(status=status, text=page, content_type="text/html")
        for i, (method, prefix, status, body) in enumerate(self._failures):
            if method == request.method and request.path.startswith(prefix):
                del self._failures[i]
                await self._notify()
                return web.json_response(body, status=status)
        if auth:
            token = request.headers.get("Authorization", "").removeprefix("Bearer ")
            if token not in self._tokens:
                return web.json_response({"code": 99991663, "msg": "invalid access token"})
        return None

    async def _token(self, request: web.Request) -> web.Response:
        if (failed := await self._guard(request, auth=False)) is not None:
            return failed
        body = await request.json()
        if body.get("app_id") != APP_ID or body.get("app_secret") != APP_SECRET:
            return web.json_response({"code": 10014, "msg": "app secret invalid"})
        self.token_requests += 1
        token = f"t-{self.token_requests}-{uuid.uuid4().hex[:8]}"
        self._tokens.add(token)
        return web.json_response(
            {"code": 0, "msg": "ok", "tenant_access_token": token, "expire": self.token_expire}
        )

    async def _bot_info(self, request: web.Request) -> web.Response:
        if (failed := await self._guard(request)) is not None:
            return failed
        bot = {"activate_status": 2, "app_name": "picobot", "open_id": self.bot_open_id}
        return web.json_response({"code": 0, "msg": "ok", "bot": bot})

    def _card_error(self, body: Any) -> str | None:
        """Why Feishu would refuse this card (None: it renders)."""
        if self.reject_cards:
            return "failed to create card content"
        card = json.loads(body["content"])
        elements = card.get("elements") if isinstance(card, dict) else None
        if not isinstance(elements, list) or not elements:
            return "card has no elements"
        for el in elements:
            tag = el.get("tag") if isinstance(el, dict) else None
            if tag == "markdown" and not isinstance(el.get("content"), str):
                return "markdown element without content"
            if tag not in {"markdown", "div", "hr", "note", "action", "img", "column_set"}:
                return f"unknown card element tag {tag!r}"
        return None

    async def _record(self, kind: str, target: str, id_type: str | None, body: Any) -> Any:
        key = body.get("uuid")
        if body.get("msg_type") in {"image", "file"}:
            if (why := self._media_error(body)) is not None:
                return web.json_response({"code": 230001, "msg": why}, status=400)
            if self.swallow_media_sends:
                self.swallowed.append(str(key))
                await self._notify()
                await self._closing.wait()  # never answered: the client is killed meanwhile
                return web.json_response({"code": 1, "msg": "shutting down"}, status=503)
        if body.get("msg_type") == "interactive" and (why := self._card_error(body)) is not None:
            self.rejected.append(("interactive", key))
            await self._notify()
            return web.json_response({"code": 230099, "msg": why}, status=400)
        if key and key in self._uuids:  # Feishu's idempotency: same uuid, same message
            self.duplicates.append(key)
            await self._notify()
            return web.json_response({"code": 0, "data": {"message_id": self._uuids[key]}})
        message_id = f"om_sent_{next(self._ids)}"
        if key:
            self._uuids[key] = message_id
        content = json.loads(body["content"])
        self.sent.append(Sent(kind, target, id_type, body["msg_type"], content, key, message_id))
        await self._notify()
        return web.json_response({"code": 0, "msg": "success", "data": {"message_id": message_id}})

    async def _upload(self, request: web.Request, kind: str) -> web.Response:
        if (failed := await self._guard(request)) is not None:
            return failed
        form = await request.post()
        part = form.get(kind)
        if kind == "image" and form.get("image_type") != "message":
            return web.json_response({"code": 234001, "msg": "invalid image_type"}, status=400)
        if kind == "file" and not (form.get("file_type") and form.get("file_name")):
            return web.json_response({"code": 234001, "msg": "file_type/file_name"}, status=400)
        if part is None or isinstance(part, str):
            return web.json_response({"code": 234001, "msg": f"no {kind} part"}, status=400)
        data = part.file.read()
        if not data:
            return web.json_response({"code": 234010, "msg": "File's size can't be 0."}, status=400)
        if len(data) > (IMAGE_MAX if kind == "image" else FILE_MAX):
            self.oversize_uploads.append(kind)
            return web.json_response(
                {"code": 234006, "msg": "The file size exceed the max value."}, status=400
            )
        key = f"{'img_v3' if kind == 'image' else 'file_v3'}_{next(self._ids)}"
        self.uploads[key] = (str(part.filename), data)
        self.upload_requests.append(kind)
        await self._notify()
        return web.json_response({"code": 0, "data": {f"{kind}_key": key}})

    async def _upload_image(self, request: web.Request) -> web.Response:
        return await self._upload(request, "image")

    async def _upload_file(self, request: web.Request) -> web.Response:
        return await self._upload(request, "file")

    def _media_error(self, body: Any) -> str | None:
        """A file or image message must name an upload of this app."""
        content = json.loads(body["content"])
        key = content.get("image_key") if body["msg_type"] == "image" else content.get("file_key")
        return None if key in self.uploads else f"unknown {body['msg_type']} key {key!r}"

    async def _send(self, request: web.Request) -> web.Response:
        if (failed := await self._guard(request)) is not None:
            return failed
        body = await request.json()
        id_type = request.query.get("receive_id_type")
        result: web.Response = await self._record("send", body["receive_id"], id_type, body)
        return result

    async def _reply(self, request: web.Request) -> web.Response:
        if (failed := await self._guard(request)) is not None:
            return failed
        mid = request.match_info["mid"]
        if mid.startswith("om_gone"):
            return web.json_response({"code": 230011, "msg": "message withdrawn"}, status=400)
        result: web.Response = await self._record("reply", mid, None, await request.json())
        return result

    async def _patch(self, request: web.Request) -> web.Response:
        """Update a card this app sent. Like Feishu, only a shared card
        (`config.update_multi` true before and after) can be updated."""
        if (failed := await self._guard(request)) is not None:
            return failed
        mid = request.match_info["mid"]
        sent = next((s for s in self.sent if s.message_id == mid), None)
        if sent is None:
            return web.json_response({"code": 230001, "msg": "message not found"}, status=400)
        card = json.loads((await request.json())["content"])
        if sent.msg_type != "interactive" or not (_shared(sent.content) and _shared(card)):
            # the fake's code for Feishu's refusal to update anything but a shared card
            return web.json_response(
                {"code": 230099, "msg": "only shared cards can be updated"}, status=400
            )
        sent.content = card
        self.patches.append((mid, card))
        await self._notify()
        return web.json_response({"code": 0, "msg": "success", "data": {}})

    async def _get_message(self, request: web.Request) -> web.Response:
        if (failed := await self._guard(request)) is not None:
            return failed
        mid = request.match_info["mid"]
        if mid not in self.messages:
            return web.json_response({"code": 230001, "msg": "message not found"}, status=400)
        msg_type, content = self.messages[mid]
        item = {"message_id": mid, "msg_type": msg_type, "body": {"content": json.dumps(content)}}
        items = [item]
        for n, (child_type, child) in enumerate(self.forwarded.get(mid, [])):
            items.append(
                {
                    "message_id": f"{mid}_child{n}",
                    "msg_type": child_type,
                    "upper_message_id": mid,  # how Feishu marks a forwarded message
                    "body": {"content": json.dumps(child)},
                }
            )
        return web.json_response({"code": 0, "data": {"items": items}})

    def add_forward(self, mid: str, children: list[tuple[str, dict[str, Any]]]) -> None:
        """A merged forward `mid` carrying `children` ((msg_type, content) each)."""
        self.messages[mid] = ("merge_forward", {"content": "Merged and Forwarded Message"})
        self.forwarded[mid] = children

    async def _react(self, request: web.Request) -> web.Response:
        if (failed := await self._guard(request)) is not None:
            return failed
        body = await request.json()
        reaction_id = f"r_{next(self._ids)}"
        mid = request.match_info["mid"]
        self.reactions.append(("add", mid, body["reaction_type"]["emoji_type"]))
        self.reactions.append(("id", mid, reaction_id))
        await self._notify()
        return web.json_response({"code": 0, "data": {"reaction_id": reaction_id}})

    async def _unreact(self, request: web.Request) -> web.Response:
        if (failed := await self._guard(request)) is not None:
            return failed
        self.reactions.append(("delete", request.match_info["mid"], request.match_info["rid"]))
        await self._notify()
        return web.json_response({"code": 0, "data": {}})

    async def _resource(self, request: web.Request) -> web.Response:
        if (failed := await self._guard(request)) is not None:
            return failed
        found = self.resources.get((request.match_info["mid"], request.match_info["key"]))
        if found is None or request.query.get("type") not in {"image", "file"}:
            return web.json_response({"code": 234003, "msg": "file not found"}, status=400)
        data, ctype, name = found
        disposition = f'attachment; filename="{name}"'
        return web.Response(
            body=data, content_type=ctype, headers={"Content-Disposition": disposition}
        )

    # -- long connection -----------------------------------------------------

    async def _endpoint(self, request: web.Request) -> web.Response:
        if (failed := await self._guard(request, auth=False)) is not None:
            return failed
        body = await request.json()
        if body.get("AppID") != APP_ID or body.get("AppSecret") != APP_SECRET:
            return web.json_response({"code": 1000040344, "msg": "invalid credential"})
        config = {
            "ReconnectCount": -1,
            "ReconnectInterval": 1,
            "ReconnectNonce": 0,
            "PingInterval": self.ping_interval,
        }
        url = self.base_url.replace("http://", "ws://") + "/ws?device_id=dev1&service_id=33"
        return web.json_response({"code": 0, "data": {"URL": url, "ClientConfig": config}})

    async def _ws(self, request: web.Request) -> web.StreamResponse:
        if self.reject_handshake is not None:
            return web.Response(status=403, headers=self.reject_handshake)
        ws = web.WebSocketResponse(autoping=False)
        await ws.prepare(request)
        conn = _Conn(ws)
        self._conns.append(conn)
        self.connections += 1
        await self._notify()
        async for msg in ws:
            if msg.type is not aiohttp.WSMsgType.BINARY or conn.silent:
                continue
            frame = self._frame()
            frame.ParseFromString(msg.data)
            headers = {h.key: h.value for h in frame.headers}
            if frame.method == 0 and headers.get("type") == "ping":
                conn.pings += 1
                pong = self._frame()
                pong.SeqID, pong.LogID, pong.service, pong.method = 0, 0, frame.service, 0
                header = pong.headers.add()
                header.key, header.value = "type", "pong"
                pong.payload = json.dumps({"PingInterval": self.ping_interval}).encode()
                await ws.send_bytes(pong.SerializeToString())
            elif frame.method == 1:
                self.acks[headers["message_id"]] = int(json.loads(frame.payload)["code"])
            await self._notify()
        return ws


def _shared(card: dict[str, Any]) -> bool:
    return card.get("config", {}).get("update_multi") is True


# -- event builders and the webhook event sender --------------------------------


def message_event(
    text: str = "hello",
    *,
    chat_type: str = "p2p",
    chat_id: str = "oc_chat1",
    sender: str = "ou_user1",
    msg_type: str = "text",
    content: dict[str, Any] | None = None,
    mentions: list[dict[str, Any]] | None = None,
    message_id: str | None = None,
    event_id: str | None = None,
    parent_id: str | None = None,
    create_time: str | None = None,
    token: str = VERIFICATION_TOKEN,
) -> dict[str, Any]:
    """An `im.message.receive_v1` event in the v2.0 envelope, as Feishu sends it."""
    created = create_time or str(int(time.time() * 1000))
    message: dict[str, Any] = {
        "message_id": message_id or f"om_{uuid.uuid4().hex[:16]}",
        "root_id": parent_id or "",
        "parent_id": parent_id or "",
        "create_time": created,
        "update_time": created,
        "chat_id": chat_id,
        "chat_type": chat_type,
        "message_type": msg_type,
        "content": json.dumps(content if content is not None else {"text": text}),
        "mentions": mentions or [],
    }
    return {
        "schema": "2.0",
        "header": {
            "event_id": event_id or uuid.uuid4().hex,
            "token": token,
            "create_time": created,
            "event_type": "im.message.receive_v1",
            "tenant_key": "tenant1",
            "app_id": APP_ID,
        },
        "event": {
            "sender": {
                "sender_id": {"open_id": sender, "user_id": "u_" + sender, "union_id": "on_x"},
                "sender_type": "user",
                "tenant_key": "tenant1",
            },
            "message": message,
        },
    }


def card_action_event(
    card: Sent,
    label: str,
    *,
    operator: str = "ou_user1",
    chat_id: str = "oc_chat1",
    event_id: str | None = None,
    token: str = VERIFICATION_TOKEN,
) -> dict[str, Any]:
    """A user presses the button `label` on the card the bot sent (`card`):
    the `card.action.trigger` callback in the v2.0 envelope, as Feishu sends it,
    echoing the button's `value`."""
    buttons = [
        b for el in card.content["elements"] if el.get("tag") == "action" for b in el["actions"]
    ]
    [button] = [b for b in buttons if b["text"]["content"] == label]
    return {
        "schema": "2.0",
        "header": {
            "event_id": event_id or uuid.uuid4().hex,
            "token": token,
            "create_time": str(int(time.time() * 1000)),
            "event_type": "card.action.trigger",
            "tenant_key": "tenant1",
            "app_id": APP_ID,
        },
        "event": {
            "operator": {
                "tenant_key": "tenant1",
                "open_id": operator,
                "user_id": "u_" + operator,
                "union_id": "on_x",
            },
            "token": "c-" + uuid.uuid4().hex,
            "action": {"value": button["value"], "tag": "button"},
            "host": "im_message",
            "context": {"open_message_id": card.message_id, "open_chat_id": chat_id},
        },
    }


def mention(key: str, open_id: str, name: str) -> dict[str, Any]:
    return {"key": key, "id": {"open_id": open_id, "user_id": "", "union_id": ""}, "name": name}


def encrypt(key: str, plaintext: str) -> str:
    """Feishu's event encryption: base64(IV + AES-256-CBC(PKCS7(plaintext))), key SHA-256."""
    iv = os.urandom(16)
    padder = padding.PKCS7(128).padder()
    padded = padder.update(plaintext.encode()) + padder.finalize()
    cipher = Cipher(algorithms.AES(hashlib.sha256(key.encode()).digest()), modes.CBC(iv))
    enc = cipher.encryptor()
    return base64.b64encode(iv + enc.update(padded) + enc.finalize()).decode()


class EventSender:
    """POSTs events to a webhook URL the way Feishu does (optionally encrypted and signed)."""

    def __init__(self, url: str, encrypt_key: str | None = None, lower_headers: bool = False):
        self.url = url
        self.encrypt_key = encrypt_key
        self.lower_headers = lower_headers

    async def post(
        self, body: dict[str, Any] | bytes, *, sign: bool = True, bad_signature: bool = False
    ) -> tuple[int, Any]:
        if isinstance(body, bytes):
            raw = body
        elif self.encrypt_key is not None:
            raw = json.dumps({"encrypt": encrypt(self.encrypt_key, json.dumps(body))}).encode()
        else:
            raw = json.dumps(body).encode()
        headers = {"Content-Type": "application/json; charset=utf-8"}
        if sign and self.encrypt_key is not None:
            timestamp, nonce = str(int(time.time())), uuid.uuid4().hex
            digest = hashlib.sha256((timestamp + nonce + self.encrypt_key).encode() + raw)
            signature = digest.hexdigest() if not bad_signature else "0" * 64
            names = ("X-Lark-Request-Timestamp", "X-Lark-Request-Nonce", "X-Lark-Signature")
            if self.lower_headers:
                names = tuple(n.lower() for n in names)  # type: ignore[assignment]
            headers.update(dict(zip(names, (timestamp, nonce, signature), strict=True)))
        async with (
            aiohttp.ClientSession() as session,
            session.post(self.url, data=io.BytesIO(raw), headers=headers) as resp,
        ):
            try:
                payload = await resp.json(content_type=None)
            except ValueError:
                payload = await resp.text()
            return resp.status, payload

    async def replay(self, body: dict[str, Any], times: int) -> list[int]:
        """Deliver the same event `times` times, as Feishu's retries do."""
        return [(await self.post(body))[0] for _ in range(times)]

    async def url_verification(self, challenge: str, token: str = VERIFICATION_TOKEN) -> Any:
        return await self.post(
            {"challenge": challenge, "token": token, "type": "url_verification"}, sign=False
        )


def config_dict(base_url: str, **overrides: Any) -> dict[str, Any]:
    """A `channels.feishu` section pointing at this fake."""
    base = {"enabled": True, "app_id": APP_ID, "app_secret": APP_SECRET, "domain": base_url}
    return {**base, **overrides}
