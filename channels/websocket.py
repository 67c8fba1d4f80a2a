"""The WebSocket terminal channel (`/ws`). Protocol: docs/PROTOCOL.md (version 1).

A client says `hello` (chat id, token), then sends `message` frames; each is
acknowledged only after the gateway recorded it. Replies are `message` frames
carrying the outbox id, so a client that reconnects and receives a reply again
can recognise it, and marked `earlier` when they were written before this
connection said hello. A bad frame gets an `error` frame; the connection stays
up until `max_bad_frames` bad frames in a row (then 4400). Who the sender is
the server decides from the token (channels.ws_input.TokenBook), never the
client. A chat id belongs to the principal that first used it
(channels.base.ChatOwners): another principal's hello for it is refused
(`forbidden_chat`, 4403) before the connection joins the chat, so no history,
live frame or parked reply reaches it. `sessions` and `history` queries are
answered through a `ChatDirectory` (channels.ws_directory) when the runtime
gives one. A browser page of another origin may not connect (cross-site
WebSocket hijacking).
Every tool call of a turn is a `tool` frame when it starts and when it ends,
whatever `show_tool_results` says; the `welcome` frame tells the client
whether the operator wants them shown. Files come by `POST <path>/upload`
(channels.ws_input.receive_upload) and a `message` names them in `attachments`.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
import weakref
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import orjson
import structlog
from aiohttp import WSCloseCode, WSMsgType, web
from pydantic import Field, SecretStr

from channels.base import (
    Capabilities,
    Channel,
    ChannelRuntime,
    ChannelSettings,
    ChatDirectory,
    ChatOwners,
    RecipientOffline,
    SendResult,
    origin_allowed,
)
from channels.ws_directory import QUERY_TYPES, QueryError, answer_query
from channels.ws_input import (
    MAX_UPLOAD_BYTES,
    Identity,
    LocalChatOwners,
    ProtocolError,
    TokenBook,
    Uploads,
    approve_text,
    parse_frame,
    receive_upload,
    safe_id,
)
from gateway.bus import (
    ApprovalAsk,
    BusClosed,
    ChannelEvent,
    EventKind,
    InboundMessage,
    MediaKind,
    OutboundMessage,
    is_failed_turn,
)

__all__ = [
    "CLOSE_BAD_FRAMES",
    "CLOSE_FORBIDDEN_CHAT",
    "CLOSE_HELLO_TIMEOUT",
    "CLOSE_UNAUTHORIZED",
    "PROTOCOL_VERSION",
    "WebSocketChannel",
    "WebSocketConfig",
]

log = structlog.get_logger(__name__)

PROTOCOL_VERSION = 1
CLOSE_BAD_FRAMES = 4400
CLOSE_UNAUTHORIZED = 4401
CLOSE_FORBIDDEN_CHAT = 4403
CLOSE_HELLO_TIMEOUT = 4408
_ID = re.compile(r"^[A-Za-z0-9._:@/-]{1,128}$")


class WebSocketConfig(ChannelSettings):
    enabled: bool = True
    path: str = "/ws"
    max_frame_bytes: int = Field(65_536, ge=1024)
    hello_timeout_secs: float = Field(10.0, gt=0)
    heartbeat_secs: float = Field(30.0, gt=0)
    # browser origins besides the gateway's own that may open /ws, e.g.
    # "https://chat.example.com" behind a proxy that rewrites Host
    allowed_origins: tuple[str, ...] = ()
    # name → token: a connection whose hello carries one is that sender (for
    # allow_from, admins, pairing); gateway.auth_token stays valid too
    tokens: dict[str, SecretStr] = Field(default_factory=dict)
    max_bad_frames: int = Field(20, ge=1)  # in a row; then the connection is closed (4400)
    max_upload_bytes: int = Field(MAX_UPLOAD_BYTES, ge=1024)  # one file by POST <path>/upload


def _frame(kind: str, **fields: Any) -> str:
    """A frame as text: orjson's (a tenth of json's time on the path of every
    reply and delta), json's for what orjson refuses (a lone surrogate, an
    integer beyond 64 bits), as before."""
    frame = {"type": kind, **fields}
    try:
        return orjson.dumps(frame).decode()
    except TypeError:
        return json.dumps(frame, ensure_ascii=False)


async def _going_away(ws: web.WebSocketResponse) -> None:
    await ws.close(code=WSCloseCode.GOING_AWAY, message=b"gateway stopping")


class WebSocketChannel(Channel):
    name = "websocket"
    local_recipients = True  # each worker's clients are its own (docs/scale-out.md)
    capabilities = Capabilities(
        max_message_chars=1_000_000,
        can_stream=True,
        can_show_typing=True,
        tool_events=True,
        media_kinds=frozenset({MediaKind.IMAGE, MediaKind.FILE}),  # uploads
    )

    def __init__(
        self, config: WebSocketConfig, *, auth_token: str | None, show_tool_results: bool = False
    ) -> None:
        super().__init__()
        self.config = config
        self._tokens = TokenBook(
            auth_token or None, {n: t.get_secret_value() for n, t in config.tokens.items()}
        )
        self._show_tools = show_tool_results
        self._runtime: ChannelRuntime | None = None
        self._uploads: Uploads | None = None
        self._clients: dict[str, set[web.WebSocketResponse]] = {}
        self._all: weakref.WeakSet[web.WebSocketResponse] = weakref.WeakSet()
        # when each connection said hello: replies written before are `earlier`
        self._since: weakref.WeakKeyDictionary[web.WebSocketResponse, datetime] = (
            weakref.WeakKeyDictionary()
        )
        self._directory: ChatDirectory | None = None
        self._owners: ChatOwners = LocalChatOwners()
        self._closing = asyncio.Event()  # stop() began: no new connection is taken

    def use_owners(self, owners: ChatOwners) -> None:
        """Record chat owners durably (the default keeps them in memory)."""
        self._owners = owners

    def use_directory(self, directory: ChatDirectory) -> None:
        """Answer `sessions`/`history` queries and list the commands in `welcome`."""
        self._directory = directory

    def setup(self, runtime: ChannelRuntime) -> None:
        self._runtime = runtime
        self._uploads = Uploads(runtime.media_dir / "websocket", self.config.max_upload_bytes)
        runtime.http.add_route("GET", self.config.path, self._handle)
        runtime.http.add_route("POST", self.config.path.rstrip("/") + "/upload", self._upload)

    async def _upload(self, request: web.Request) -> web.StreamResponse:
        assert self._uploads is not None
        return await receive_upload(
            request, self._tokens, self._uploads, self.config.allowed_origins
        )

    async def start(self) -> None:
        self.not_ready_reason = None  # the HTTP server is already listening

    async def stop(self) -> None:
        """Close every connection with 1001 (going away), all at once, and take
        no new one: a client that reconnects at once (the terminal client does)
        is refused 503 rather than kept open until the HTTP server's end."""
        self.not_ready_reason = "stopped"
        self._closing.set()
        closes = [_going_away(ws) for ws in list(self._all)]
        for failed in await asyncio.gather(*closes, return_exceptions=True):
            if isinstance(failed, Exception):
                log.debug("ws_close_failed", error=type(failed).__name__)

    @property
    def connected_chats(self) -> int:
        return len(self._clients)

    # -- outbound ------------------------------------------------------------
    def reaches(self, chat_id: str) -> bool:
        return any(not ws.closed for ws in self._clients.get(chat_id, ()))

    async def send(self, message: OutboundMessage) -> SendResult:
        reply_to = message.reply_to_message_id
        prefix = f"{message.chat_id}/"
        if reply_to and reply_to.startswith(prefix):
            reply_to = reply_to[len(prefix) :]
        written = message.created_at
        fields: dict[str, Any] = {
            "id": message.outbox_id,
            "reply_to": reply_to,
            "session_id": message.session_id,
            "run_id": message.run_id,
            "created_at": written.isoformat() if written else None,
            "text": message.text,
        }
        if is_failed_turn(message):  # the notice of a turn that failed (docs/PROTOCOL.md)
            fields["failed"] = True

        def render(ws: web.WebSocketResponse) -> str:
            since = self._since.get(ws)
            earlier = written is not None and since is not None and written < since
            return _frame("message", **fields, earlier=earlier)

        if (ask := ApprovalAsk.of(message)) is not None:  # before its text (docs/PROTOCOL.md)
            labels = {"approve": ask.approve_label, "deny": ask.deny_label}
            frame = _frame(
                "approval_request",
                **fields,
                approval_id=ask.approval_id,
                tools=ask.tools,
                labels=labels,
            )
            await self._broadcast(message.chat_id, frame)
        if not await self._broadcast_each(message.chat_id, render):
            raise RecipientOffline(f"no client connected for chat {message.chat_id}")
        return SendResult((str(message.outbox_id),))

    async def notify(self, event: ChannelEvent) -> None:
        fields: dict[str, Any] = {"session_id": event.session_id, "run_id": event.run_id}
        if event.kind is EventKind.DELTA:
            fields["text"] = event.text
        elif event.kind is EventKind.TOOL:
            if event.tool is None:
                return  # a batch for channels that cannot edit; this one had each call
            call = event.tool
            fields.update(
                id=call.call_id,
                name=call.name,
                summary=call.summary,
                status=call.status.value,
                secs=call.secs,
            )
        await self._broadcast(event.chat_id, _frame(event.kind.value, **fields))

    async def _broadcast(self, chat_id: str, frame: str) -> bool:
        return await self._broadcast_each(chat_id, lambda _ws: frame)

    async def _broadcast_each(
        self, chat_id: str, render: Callable[[web.WebSocketResponse], str]
    ) -> bool:
        delivered = False
        for ws in list(self._clients.get(chat_id, ())):
            if ws.closed:
                continue
            try:
                await ws.send_str(render(ws))
                delivered = True
            except (ConnectionError, RuntimeError) as exc:
                log.debug("ws_send_failed", error=type(exc).__name__)
        return delivered

    # -- inbound -------------------------------------------------------------
    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if self._closing.is_set():
            return web.Response(status=503, text="the gateway is stopping\n")
        if not origin_allowed(request, self.config.allowed_origins):
            log.warning("ws_origin_refused", origin=request.headers.get("Origin"))
            return web.Response(status=403, text="cross-origin WebSocket refused\n")
        ws = web.WebSocketResponse(
            max_msg_size=self.config.max_frame_bytes,
            heartbeat=self.config.heartbeat_secs,
            compress=False,  # small JSON frames: deflate costs more CPU than it saves
        )
        await ws.prepare(request)
        self._all.add(ws)
        if self._closing.is_set():  # stop() ran while this connection was being opened
            await _going_away(ws)
            return ws
        chat_id: str | None = None
        try:
            hello = await self._hello(ws)
            if hello is None:
                return ws
            chat_id, identity = hello
            self._clients.setdefault(chat_id, set()).add(ws)
            assert self._runtime is not None
            self._runtime.recipient_online(chat_id)
            bad = 0  # bad frames in a row
            async for msg in ws:
                if msg.type is WSMsgType.TEXT:
                    ok = await self._on_text(ws, chat_id, identity, msg.data)
                elif msg.type is WSMsgType.BINARY:
                    ok = False
                    await ws.send_str(
                        _frame(
                            "error",
                            code="bad_frame",
                            message="binary frames are not supported; send JSON text",
                        )
                    )
                elif msg.type is WSMsgType.ERROR:
                    log.info("ws_protocol_error", error=type(ws.exception()).__name__)
                    break
                else:
                    continue
                bad = 0 if ok else bad + 1
                if bad >= self.config.max_bad_frames:
                    await self._close_bad(ws)
                    break
        finally:
            if chat_id is not None:
                peers = self._clients.get(chat_id)
                if peers is not None:
                    peers.discard(ws)
                    if not peers:
                        del self._clients[chat_id]
        return ws

    async def _close_bad(self, ws: web.WebSocketResponse) -> None:
        limit = self.config.max_bad_frames
        log.info("ws_closed_bad_frames", limit=limit)
        await ws.send_str(
            _frame("error", code="too_many_bad_frames", message=f"{limit} bad frames in a row")
        )
        await ws.close(code=CLOSE_BAD_FRAMES, message=b"too many bad frames")

    async def _hello(self, ws: web.WebSocketResponse) -> tuple[str, Identity] | None:
        """Read and check the hello frame; the chat id and who the connection
        is, or None after closing."""
        try:
            async with asyncio.timeout(self.config.hello_timeout_secs):
                msg = await ws.receive()
        except TimeoutError:
            await ws.send_str(
                _frame("error", code="hello_required", message="send a hello frame first")
            )
            await ws.close(code=CLOSE_HELLO_TIMEOUT, message=b"hello timeout")
            return None
        if msg.type is not WSMsgType.TEXT:
            await ws.close(code=WSCloseCode.POLICY_VIOLATION, message=b"hello expected")
            return None
        try:
            frame = parse_frame(msg.data)
            if frame.get("type") != "hello":
                raise ProtocolError("hello_required", "the first frame must be a hello frame")
            identity = self._tokens.identify(frame.get("token"))
            if identity is None:
                await ws.send_str(
                    _frame("error", code="unauthorized", message="wrong or missing token")
                )
                await ws.close(code=CLOSE_UNAUTHORIZED, message=b"unauthorized")
                log.warning("ws_unauthorized")
                return None
            chat_id = frame.get("chat_id") or uuid.uuid4().hex
            if not isinstance(chat_id, str) or not _ID.match(chat_id):
                raise ProtocolError(
                    "bad_frame", "chat_id must be 1-128 characters of [A-Za-z0-9._:@/-]"
                )
        except ProtocolError as exc:
            await ws.send_str(_frame("error", code=exc.code, message=str(exc)))
            await ws.close(code=WSCloseCode.POLICY_VIOLATION, message=exc.code.encode())
            return None
        if not await self._may_open(ws, chat_id, identity):
            return None
        welcome: dict[str, Any] = {
            "protocol": PROTOCOL_VERSION,
            "chat_id": chat_id,
            "show_tool_results": self._show_tools,
        }
        if self._directory is not None:
            welcome["commands"] = [
                {"name": c.name, "help": c.help} for c in self._directory.commands()
            ]
        self._since[ws] = datetime.now(UTC)
        await ws.send_str(_frame("welcome", **welcome))
        return chat_id, identity

    async def _may_open(self, ws: web.WebSocketResponse, chat_id: str, identity: Identity) -> bool:
        """Whether `identity` owns `chat_id` (claiming it when it is new); when
        not, the connection got an error frame and is closed."""
        principal = identity.principal
        try:
            owner = await self._owners.claim(chat_id, principal, self._tokens.legacy_owner)
        except Exception:
            log.exception("ws_chat_claim_failed")
            await ws.send_str(
                _frame("error", code="internal", message="the chat could not be opened; retry")
            )
            await ws.close(code=WSCloseCode.INTERNAL_ERROR, message=b"internal")
            return False
        if owner == principal:
            return True
        log.warning("ws_chat_forbidden", principal=principal)
        await ws.send_str(
            _frame(
                "error",
                code="forbidden_chat",
                message="this chat id belongs to another user; "
                "open a chat of your own (omit chat_id for a new one)",
            )
        )
        await ws.close(code=CLOSE_FORBIDDEN_CHAT, message=b"forbidden chat")
        return False

    async def _on_text(
        self, ws: web.WebSocketResponse, chat_id: str, identity: Identity, data: str
    ) -> bool:
        """Handle one text frame; False when it was bad (an error frame went back)."""
        frame_id: Any = None
        try:
            frame = parse_frame(data)
            frame_id = safe_id(frame.get("id"))
            kind = frame.get("type")
            if kind == "ping":
                await ws.send_str(_frame("pong", id=frame_id))
            elif kind == "message":
                await self._on_message(ws, chat_id, identity, frame)
            elif kind == "approve":  # answered like the command it stands for
                as_text = {"id": frame.get("id"), "sender_id": frame.get("sender_id")}
                await self._on_message(
                    ws, chat_id, identity, as_text | {"text": approve_text(frame)}
                )
            elif isinstance(kind, str) and kind in QUERY_TYPES and self._directory is not None:
                await self._on_query(ws, chat_id, frame)
            elif kind == "hello":
                raise ProtocolError("bad_frame", "already said hello on this connection")
            else:
                shown = kind if isinstance(kind, str) and len(kind) <= 40 else type(kind).__name__
                raise ProtocolError("unknown_type", f"unknown frame type {shown!r}")
        except ProtocolError as exc:
            await ws.send_str(_frame("error", code=exc.code, message=str(exc), id=frame_id))
            return False
        return True

    async def _on_query(
        self, ws: web.WebSocketResponse, chat_id: str, frame: dict[str, Any]
    ) -> None:
        assert self._directory is not None
        try:
            answer = await answer_query(self._directory, chat_id, frame)
        except QueryError as exc:
            raise ProtocolError(exc.code, str(exc)) from None
        except Exception:
            log.exception("ws_query_failed", query=frame.get("type"))
            raise ProtocolError("internal", "the query could not be answered; retry") from None
        await ws.send_str(json.dumps(answer, ensure_ascii=False))

    async def _on_message(
        self, ws: web.WebSocketResponse, chat_id: str, identity: Identity, frame: dict[str, Any]
    ) -> None:
        client_id, text = frame.get("id"), frame.get("text", "")
        if not isinstance(client_id, str) or not _ID.match(client_id):
            raise ProtocolError(
                "bad_frame", "message.id must be 1-128 characters of [A-Za-z0-9._:@/-]"
            )
        if not isinstance(text, str):
            raise ProtocolError("bad_frame", "message.text must be a non-empty string")
        sender = identity.sender_for(frame.get("sender_id"), chat_id)
        assert self._uploads is not None
        media = await self._uploads.resolve(identity.principal, frame.get("attachments"))
        if not text.strip() and not media:
            raise ProtocolError("bad_frame", "message.text must be a non-empty string")
        message = InboundMessage(
            channel=self.name,
            chat_id=chat_id,
            sender_id=sender,
            text=text,
            message_id=f"{chat_id}/{client_id}",
            media=media,
        )
        assert self._runtime is not None
        try:
            receipt = await self._runtime.bus.submit(message)
        except BusClosed:
            await ws.send_str(
                _frame(
                    "error",
                    code="shutting_down",
                    message="the gateway is stopping; resend later",
                    id=client_id,
                )
            )
            return
        except Exception:
            log.exception("ws_submit_failed")
            await ws.send_str(
                _frame(
                    "error",
                    code="internal",
                    message="the message could not be recorded; resend it",
                    id=client_id,
                )
            )
            return
        await ws.send_str(_frame("ack", id=client_id, status=receipt.value))
