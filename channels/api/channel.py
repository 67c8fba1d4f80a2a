"""The OpenAI-compatible API channel (`channels.api`, docs/api.md).

`POST /v1/chat/completions` is an inbound message like any other: recorded
in the durable inbox (under the same access policy, rate limits, budgets and
commands), answered by a turn, and its reply, an outbox row, is the HTTP
response. `GET /v1/models` lists one model per agent. `GET
/v1/picobot/replies/{key}` returns the answer of a request sent with that
`Idempotency-Key`, however the first connection ended.

Who: `Authorization: Bearer <key>`, a key of `channels.api.keys` (the
principal `token:<name>`, the same as a WebSocket token of that name) or
`gateway.auth_token` (the operator). With neither configured only loopback
clients are served, as the operator. What: a conversation is
`<principal>/<session>`, the session named by the `X-Picobot-Session` header,
else the body's `user`, else "default": a key reaches only its own sessions,
by construction. One request runs per session at a time (409 otherwise).

Idempotency: the message's platform id is `<principal>:<Idempotency-Key>` (a
random one without the header), so a retry is a duplicate the inbox refuses
to record twice; it waits for, or reads back, the first one's reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import math
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog
from aiohttp import web

from channels.api.config import ApiConfig
from channels.api.mcp_server import McpEndpoint
from channels.api.wire import (
    ApiRequest,
    BadRequest,
    check_session,
    chunk,
    completion,
    error_body,
    models_body,
    parse_request,
    read_body,
)
from channels.base import (
    Capabilities,
    Channel,
    ChannelRuntime,
    ChatDirectory,
    ReplyArchive,
    SendResult,
    StoredReply,
)
from channels.ws_input import Identity, TokenBook
from gateway.bus import (
    CHAT_REQUEST,
    BusClosed,
    ChannelEvent,
    EventKind,
    InboundMessage,
    OutboundMessage,
    Receipt,
    TurnRequest,
    is_failed_turn,
)

__all__ = ["ApiChannel"]

log = structlog.get_logger(__name__)

MCP_PATH = "/mcp"
SESSION_HEADER = "X-Picobot-Session"
KEY_HEADER = "Idempotency-Key"
DEFAULT_SESSION = "default"


@dataclass(slots=True)
class _Waiter:
    """One HTTP request waiting for the reply to `message_id` (retries of it too)."""

    message_id: str
    key: str | None  # the client's Idempotency-Key
    reply: asyncio.Future[OutboundMessage] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )
    deltas: list[str] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)


def _json(status: int, body: dict[str, Any], **headers: str) -> web.Response:
    return web.json_response(body, status=status, headers=headers or None)


def _error(
    status: int, message: str, kind: str, param: str | None = None, code: str | None = None
) -> web.Response:
    return _json(status, error_body(message, kind, param, code))


def _loopback(peer: str | None) -> bool:
    try:
        return ipaddress.ip_address(peer or "").is_loopback
    except ValueError:
        return False


class ApiChannel(Channel):
    name = "api"
    local_recipients = True  # the waiting requests are this process's (docs/scale-out.md)
    capabilities = Capabilities(max_message_chars=10_000_000, can_stream=True)

    def __init__(self, config: ApiConfig, *, auth_token: str | None, agents: list[str]) -> None:
        super().__init__()
        self.config = config
        self._tokens = TokenBook(
            auth_token or None, {n: k.get_secret_value() for n, k in config.keys.items()}
        )
        self.agents = list(agents)
        self._runtime: ChannelRuntime | None = None
        self._archive: ReplyArchive | None = None
        self._waiters: dict[str, list[_Waiter]] = {}  # by message id
        # chat id → (message id, until when) of its running request: until its
        # reply, or a reply timeout after its client stopped waiting
        self._running: dict[str, tuple[str, float]] = {}
        self._closing = False
        self._mcp = McpEndpoint(self, self.identify) if config.mcp else None

    def use_archive(self, archive: ReplyArchive) -> None:
        """Where replies are read back from storage (retries, fetches)."""
        self._archive = archive
        if self._mcp is not None:
            self._mcp.archive = archive

    def use_directory(self, directory: ChatDirectory) -> None:
        """Where the MCP server's `read_history` reads a session from."""
        if self._mcp is not None:
            self._mcp.directory = directory

    def setup(self, runtime: ChannelRuntime) -> None:
        self._runtime = runtime
        runtime.http.add_route("POST", "/v1/chat/completions", self._completions)
        runtime.http.add_route("GET", "/v1/models", self._models)
        runtime.http.add_route("GET", "/v1/picobot/replies/{key}", self._fetch)
        if self._mcp is not None:
            for method in ("POST", "GET", "DELETE"):
                runtime.http.add_route(method, MCP_PATH, self._mcp.handle)

    async def start(self) -> None:
        if self._mcp is not None:
            await self._mcp.start()
        self.not_ready_reason = None

    async def stop(self) -> None:
        self.not_ready_reason = "stopped"
        self._closing = True
        if self._mcp is not None:
            await self._mcp.stop()

    # -- outbound ------------------------------------------------------------------------
    def reaches(self, chat_id: str) -> bool:
        """A request of the session waits here for its reply."""
        running = self._running.get(chat_id)
        return running is not None and running[0] in self._waiters

    async def send(self, message: OutboundMessage) -> SendResult:
        """The reply goes to the requests waiting for it; with none (the client
        left, the gateway restarted) it stays in the outbox, fetchable."""
        answered = message.reply_to_message_id or ""
        for waiter in self._waiters.get(answered, ()):
            if not waiter.reply.done():
                waiter.reply.set_result(message)
        if self._running_in(message.chat_id) == answered and answered not in self._waiters:
            del self._running[message.chat_id]
        return SendResult((str(message.outbox_id),))

    async def notify(self, event: ChannelEvent) -> None:
        if event.kind is not EventKind.DELTA:
            return
        running = self._running_in(event.chat_id)
        for waiter in self._waiters.get(running or "", ()):
            waiter.deltas.append(event.text)
            waiter.changed.set()

    # -- inbound -------------------------------------------------------------------------
    def _identify(self, request: web.Request) -> Identity | None:
        return self.identify(request.headers, request.remote)

    def identify(self, headers: Mapping[str, str], peer: str | None) -> Identity | None:
        """Who a request is (its `Authorization: Bearer` key, or a loopback
        `peer` when no key is configured); None: nobody we serve."""
        scheme, _, token = headers.get("Authorization", "").partition(" ")
        if not self._tokens.required:
            return Identity() if _loopback(peer) else None
        if scheme.lower() != "bearer" or not token:
            return None
        return self._tokens.identify(token.strip())

    def _unauthorized(self) -> web.Response:
        return _error(
            401,
            "a valid API key is required: Authorization: Bearer <key> (channels.api.keys)",
            "invalid_request_error",
            code="invalid_api_key",
        )

    async def _models(self, request: web.Request) -> web.Response:
        if self._identify(request) is None:
            return self._unauthorized()
        return _json(200, models_body(self.agents))

    def _session(self, request: web.Request, user: str | None) -> str:
        value = request.headers.get(SESSION_HEADER) or user or DEFAULT_SESSION
        return check_session(
            value, SESSION_HEADER if request.headers.get(SESSION_HEADER) else "user"
        )

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        identity = self._identify(request)
        if identity is None:
            return self._unauthorized()
        try:
            raw = await read_body(request, self.config.max_request_bytes)
            try:
                body = json.loads(raw)
            except ValueError:
                raise BadRequest("the body is not JSON") from None
            asked = parse_request(body, frozenset(self.agents))
            session = self._session(request, asked.user)
            key = request.headers.get(KEY_HEADER)
            if key is not None:
                check_session(key, KEY_HEADER)
        except BadRequest as exc:
            return _error(exc.status, str(exc), exc.kind, exc.param, exc.code)
        chat_id = f"{identity.principal}/{session}"
        message_id = f"{identity.principal}:{key or uuid.uuid4().hex}"
        return await self._answer(request, identity, asked, chat_id, message_id, key)

    async def _answer(
        self,
        request: web.Request,
        identity: Identity,
        asked: ApiRequest,
        chat_id: str,
        message_id: str,
        key: str | None,
    ) -> web.StreamResponse:
        try:
            async with self._exchange(identity, asked, chat_id, message_id, key) as waiter:
                respond = self._stream if asked.stream else self._whole
                return await respond(request, asked, waiter, message_id)
        except BadRequest as exc:
            return _error(exc.status, str(exc), exc.kind, exc.param, exc.code)

    async def ask(
        self, identity: Identity, session: str, text: str, agent: str | None = None
    ) -> str:
        """One message and its answer, as a request without streaming (the MCP
        server's `send_message`). Raises BadRequest, TimeoutError."""
        check_session(session, "session")
        if agent is not None and agent not in self.agents:
            raise BadRequest(f"no agent {agent!r}", "agent", status=404)
        asked = ApiRequest(text, "picobot", agent, False, False, None)
        chat_id = f"{identity.principal}/{session}"
        message_id = f"{identity.principal}:{uuid.uuid4().hex}"
        async with self._exchange(identity, asked, chat_id, message_id, None) as waiter:
            async with asyncio.timeout(self.config.reply_timeout_secs):
                reply = await asyncio.shield(waiter.reply)
        return reply.text

    @contextlib.asynccontextmanager
    async def _exchange(
        self,
        identity: Identity,
        asked: ApiRequest,
        chat_id: str,
        message_id: str,
        key: str | None,
    ) -> AsyncIterator[_Waiter]:
        """The message recorded (or found recorded: a retry) and a waiter for
        its reply, registered before the record so no reply is missed.
        Raises BadRequest (409 while another request of the session runs)."""
        if self._closing:
            raise BadRequest("the gateway is stopping", status=503, kind="server_error")
        running = self._running_in(chat_id)
        if running is not None and running != message_id:
            raise BadRequest(
                "a request for this session is still running; send the next one when it is "
                "answered (or use another X-Picobot-Session)",
                status=409,
                code="session_busy",
            )
        waiter = _Waiter(message_id, key)
        self._waiters.setdefault(message_id, []).append(waiter)
        first = running is None
        if first:
            self._running[chat_id] = (message_id, math.inf)
        try:
            stored = await self._record(identity, asked, chat_id, message_id)
            if stored is not None and stored.text is not None and not waiter.reply.done():
                waiter.reply.set_result(
                    OutboundMessage(self.name, chat_id, stored.text, run_id=stored.run_id,
                                    metadata=stored.metadata)
                )  # fmt: skip
            yield waiter
        finally:
            waiters = self._waiters.get(message_id, [])
            if waiter in waiters:
                waiters.remove(waiter)
            if not waiters:
                self._waiters.pop(message_id, None)
            if self._running_in(chat_id) == message_id:
                if waiter.reply.done():  # answered, whichever request of it saw it
                    del self._running[chat_id]
                elif first:  # the turn goes on: busy until its reply (`send`), or a while
                    ends = time.monotonic() + self.config.reply_timeout_secs
                    self._running[chat_id] = (message_id, ends)

    async def _record(
        self, identity: Identity, asked: ApiRequest, chat_id: str, message_id: str
    ) -> StoredReply | None:
        """Into the inbox; for a retry (a duplicate), what storage has of its reply."""
        assert self._runtime is not None
        message = InboundMessage(
            channel=self.name,
            chat_id=chat_id,
            sender_id=identity.sender or "operator",
            text=asked.text,
            message_id=message_id,
            request=TurnRequest(agent=asked.agent) if asked.agent else CHAT_REQUEST,
            addressed=True,
        )
        try:
            receipt = await self._runtime.bus.submit(message)
        except BusClosed:
            raise BadRequest("the gateway is stopping", status=503, kind="server_error") from None
        if receipt is Receipt.DEAD_LETTER:
            raise BadRequest("the message could not be recorded")
        if receipt is Receipt.DUPLICATE and self._archive is not None:
            return await self._archive.reply(chat_id, message_id)
        return None

    async def _usage(self, reply: OutboundMessage) -> tuple[int, int] | None:
        if self._archive is None or reply.run_id is None:
            return None
        return await self._archive.usage(reply.run_id)

    async def _whole(
        self, request: web.Request, asked: ApiRequest, waiter: _Waiter, message_id: str
    ) -> web.StreamResponse:
        try:
            async with asyncio.timeout(self.config.reply_timeout_secs):
                reply = await asyncio.shield(waiter.reply)
        except TimeoutError:
            return self._still_running(waiter)
        if is_failed_turn(reply):
            return _error(502, reply.text, "server_error", code="turn_failed")
        body = completion(
            _response_id(message_id), asked.model, reply.text, await self._usage(reply)
        )
        return _json(200, body)

    def _still_running(self, waiter: _Waiter) -> web.Response:
        return _error(504, _pending_text(waiter.key), "timeout", code="reply_pending")

    def _running_in(self, chat_id: str) -> str | None:
        """The message id of the request running in `chat_id`, if any."""
        running = self._running.get(chat_id)
        if running is None:
            return None
        if running[1] <= time.monotonic():
            del self._running[chat_id]
            return None
        return running[0]

    async def _stream(
        self, request: web.Request, asked: ApiRequest, waiter: _Waiter, message_id: str
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        response_id = _response_id(message_id)
        sent = ""

        async def event(body: dict[str, Any] | str) -> None:
            data = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
            await response.write(f"data: {data}\n\n".encode())

        try:
            await event(chunk(response_id, asked.model, role=True, text=""))
            async with asyncio.timeout(self.config.reply_timeout_secs):
                while not waiter.reply.done():
                    waiter.changed.clear()
                    if waiter.deltas:
                        piece = "".join(waiter.deltas)
                        waiter.deltas.clear()
                        sent += piece
                        await event(chunk(response_id, asked.model, text=piece))
                        continue
                    await _either(waiter.changed, waiter.reply)
            reply = waiter.reply.result()
            text = reply.text
            rest = text[len(sent) :] if text.startswith(sent) else f"\n\n{text}"
            if is_failed_turn(reply):
                await event(error_body(text, "server_error", code="turn_failed"))
            else:
                if rest:
                    await event(chunk(response_id, asked.model, text=rest))
                await event(chunk(response_id, asked.model, finish=True))
                if asked.include_usage:
                    usage = await self._usage(reply)
                    await event(chunk(response_id, asked.model, usage=usage, usage_chunk=True))
            await event("[DONE]")
        except TimeoutError:
            await event(error_body(_pending_text(waiter.key), "timeout", code="reply_pending"))
        except (ConnectionResetError, ConnectionError):  # the client left: the answer is kept
            log.info("api_stream_client_gone", message_id=message_id)
        return response

    async def _fetch(self, request: web.Request) -> web.StreamResponse:
        identity = self._identify(request)
        if identity is None:
            return self._unauthorized()
        try:
            session = self._session(request, None)
            key = check_session(request.match_info["key"], "key")
        except BadRequest as exc:
            return _error(400, str(exc), "invalid_request_error", exc.param)
        if self._archive is None:
            return _error(503, "replies are not kept by this gateway", "server_error")
        chat_id = f"{identity.principal}/{session}"
        message_id = f"{identity.principal}:{key}"
        stored = await self._archive.reply(chat_id, message_id)
        if not stored.known:
            return _error(
                404,
                f"no request with Idempotency-Key {key!r} in this session",
                "invalid_request_error",
                code="not_found",
            )
        if stored.text is None:
            return _json(202, {"status": "running", "retry_after_secs": 1}, **{"Retry-After": "1"})
        if stored.failed:
            return _error(502, stored.text, "server_error", code="turn_failed")
        return _json(
            200, completion(_response_id(message_id), "picobot", stored.text, stored.usage)
        )


def _pending_text(key: str | None) -> str:
    if key is None:
        return (
            "the answer is not ready yet; it will be in the session's history (send an "
            f"{KEY_HEADER} to fetch an answer later)"
        )
    return (
        f"the answer is not ready yet; fetch it with GET /v1/picobot/replies/{key} "
        f"and the same {SESSION_HEADER}"
    )


def _response_id(message_id: str) -> str:
    return "chatcmpl-" + uuid.uuid5(uuid.NAMESPACE_URL, message_id).hex


async def _either(event: asyncio.Event, future: asyncio.Future[Any]) -> None:
    """Until `event` is set or `future` is done."""
    waiting = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait({waiting, future}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not waiting.done():
            waiting.cancel()
            await asyncio.gather(waiting, return_exceptions=True)
