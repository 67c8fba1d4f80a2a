"""Feishu long connection ("长连接") client: events without a public URL.

Speaks the protocol directly on aiohttp: endpoint discovery, protobuf
`pbbp2.Frame`s (the SDK's generated class only; its `ws.Client` captures an
event loop at import and blocks), ping/pong at the server's interval, chunk
reassembly, an ack frame per event only after the handler returned (i.e. after
the event is durably recorded), dead-connection detection (nothing received
for 3 ping intervals) and reconnects with exponential backoff and jitter. The
connection state is reported through `on_state` (None = connected). It never
blocks the event loop: the SDK module is imported in a worker thread.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import random
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import parse_qs, urlparse

import aiohttp
import structlog

from channels.feishu.api import FeishuApi, FeishuApiError
from gateway.bus import BusClosed

__all__ = ["LongConnection", "load_frame_class"]

log = structlog.get_logger("channels.feishu.longconn")

CONTROL, DATA = 0, 1
DEFAULT_PING_SECS = 120.0
DEAD_AFTER_PINGS = 3
_RETRYABLE_ENDPOINT_CODES = frozenset({1, 1000040343})
_MAX_PENDING_CHUNKS = 128
_CHUNK_TTL_SECS = 30.0

EventHandler = Callable[[bytes], Awaitable[None]]
StateListener = Callable[[str | None], None]


async def load_frame_class() -> Any:
    """The SDK's protobuf Frame class; imported off the loop (the SDK is slow to import)."""
    module = await asyncio.to_thread(_import_pb)
    return module.Frame


def _import_pb() -> Any:
    # Importing any lark_oapi module runs lark_oapi/__init__, whose ws.client grabs
    # (or creates and leaks) an event loop at import time. Give it a throwaway loop
    # in this worker thread and close it; we never use the SDK's ws.Client.
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        return importlib.import_module("lark_oapi.ws.pb.pbbp2_pb2")
    finally:
        asyncio.set_event_loop(None)
        loop.close()


class _ConnectionEnded(Exception):
    pass


class LongConnection:
    def __init__(
        self,
        api: FeishuApi,
        on_event: EventHandler,
        on_state: StateListener,
        *,
        ping_interval_secs: float | None = None,
        reconnect_base_secs: float = 1.0,
        reconnect_max_secs: float = 60.0,
        connect_timeout_secs: float = 10.0,
    ) -> None:
        self._api = api
        self._on_event = on_event
        self._on_state = on_state
        self._ping_override = ping_interval_secs
        self._ping_interval = ping_interval_secs or DEFAULT_PING_SECS
        self._reconnect_base = reconnect_base_secs
        self._reconnect_max = reconnect_max_secs
        self._connect_timeout = connect_timeout_secs
        self._frame_cls: Any = None
        self._last_rx = 0.0
        self._send_lock = asyncio.Lock()
        self._chunks: OrderedDict[str, tuple[float, list[bytes | None]]] = OrderedDict()
        self.first_attempt_done = asyncio.Event()
        self.connections = 0  # successful handshakes so far (observability, tests)

    async def run(self) -> None:
        """Connect and reconnect until cancelled."""
        self._frame_cls = await load_frame_class()
        failures = 0
        while True:
            reason: str
            try:
                await self._connect_once()
                reason = "feishu long connection closed; reconnecting"
                failures = 0
            except asyncio.CancelledError:
                raise
            except _ConnectionEnded as exc:
                reason = str(exc)
                failures = 0
            except FeishuApiError as exc:
                reason = f"feishu long connection endpoint refused: {exc}"
                # Client errors (bad credentials…) will not fix themselves quickly.
                failures = failures + 1 if exc.code in _RETRYABLE_ENDPOINT_CODES else 8
            except aiohttp.WSServerHandshakeError as exc:
                reason = _handshake_reason(exc)
                failures += 1
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                reason = f"feishu long connection failed: {type(exc).__name__}: {exc}"
                failures += 1
            except Exception as exc:  # keep the connection loop alive whatever happens
                log.exception("feishu long connection error", channel="feishu")
                reason = f"feishu long connection error: {type(exc).__name__}"
                failures += 1
            self._on_state(reason)
            self.first_attempt_done.set()
            delay = min(self._reconnect_max, self._reconnect_base * (2 ** min(failures, 16)))
            delay *= random.uniform(0.5, 1.0)
            log.warning("feishu long connection down", reason=reason, retry_in=round(delay, 2))
            await asyncio.sleep(delay)

    async def _connect_once(self) -> None:
        async with asyncio.timeout(self._connect_timeout):
            endpoint = await self._api.ws_endpoint()
            self._configure(endpoint.client_config)
            query = parse_qs(urlparse(endpoint.url).query)
            service_id = int((query.get("service_id") or ["0"])[0] or 0)
            close_timeout = min(5.0, self._ping_interval)
            ws = await self._api.session.ws_connect(
                endpoint.url,
                autoping=True,
                timeout=aiohttp.ClientWSTimeout(ws_close=close_timeout),
                max_msg_size=8 * 1024 * 1024,
            )
        loop = asyncio.get_running_loop()
        self._last_rx = loop.time()
        self.connections += 1
        self._on_state(None)
        self.first_attempt_done.set()
        log.info("feishu long connection established", channel="feishu")
        queue: asyncio.Queue[tuple[Any, bytes]] = asyncio.Queue(64)
        tasks = [
            asyncio.create_task(self._read(ws, queue), name="feishu-ws-reader"),
            asyncio.create_task(self._ping(ws, service_id), name="feishu-ws-pinger"),
            asyncio.create_task(self._work(ws, queue), name="feishu-ws-worker"),
        ]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()  # re-raise _ConnectionEnded or an unexpected error
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await ws.close()

    # -- tasks of one connection --------------------------------------------

    async def _read(self, ws: aiohttp.ClientWebSocketResponse, queue: asyncio.Queue[Any]) -> None:
        loop = asyncio.get_running_loop()
        while True:
            msg = await ws.receive()
            if msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED):
                raise _ConnectionEnded("feishu long connection closed by the server; reconnecting")
            if msg.type is aiohttp.WSMsgType.ERROR:
                raise _ConnectionEnded(f"feishu long connection error: {ws.exception()!r}")
            self._last_rx = loop.time()
            if msg.type is not aiohttp.WSMsgType.BINARY:
                continue
            frame = self._frame_cls()
            try:
                frame.ParseFromString(msg.data)
            except Exception:  # protobuf DecodeError: a bad frame must not kill the link
                log.warning("feishu long connection: undecodable frame", size=len(msg.data))
                continue
            headers = {h.key: h.value for h in frame.headers}
            if frame.method == CONTROL:
                if headers.get("type") == "pong" and frame.payload:
                    self._configure(_json_or_empty(frame.payload))
                continue
            if headers.get("type") != "event":
                log.debug("feishu long connection: ignored frame", type=headers.get("type"))
                continue
            payload = self._reassemble(headers, bytes(frame.payload), loop.time())
            if payload is not None:
                await queue.put((frame, payload))

    async def _ping(self, ws: aiohttp.ClientWebSocketResponse, service_id: int) -> None:
        loop = asyncio.get_running_loop()
        while True:
            frame = self._frame_cls()
            frame.SeqID, frame.LogID = 0, 0
            frame.service, frame.method = service_id, CONTROL
            header = frame.headers.add()
            header.key, header.value = "type", "ping"
            async with self._send_lock:
                await ws.send_bytes(frame.SerializeToString())
            await asyncio.sleep(self._ping_interval)
            silent_for = loop.time() - self._last_rx
            if silent_for > DEAD_AFTER_PINGS * self._ping_interval:
                raise _ConnectionEnded(
                    f"feishu long connection silent for {silent_for:.1f}s; reconnecting"
                )

    async def _work(self, ws: aiohttp.ClientWebSocketResponse, queue: asyncio.Queue[Any]) -> None:
        while True:
            frame, payload = await queue.get()
            loop = asyncio.get_running_loop()
            started = loop.time()
            code = 200
            try:
                await self._on_event(payload)
            except asyncio.CancelledError:
                raise
            except BusClosed:
                continue  # shutting down: no ack, the platform will redeliver
            except Exception:
                log.exception("feishu long connection: event handling failed")
                code = 500
            header = frame.headers.add()
            header.key, header.value = "biz_rt", str(int((loop.time() - started) * 1000))
            frame.payload = json.dumps({"code": code}).encode()
            async with self._send_lock:
                await ws.send_bytes(frame.SerializeToString())

    # -- helpers -------------------------------------------------------------

    def _configure(self, config: dict[str, Any]) -> None:
        interval = config.get("PingInterval")
        if self._ping_override is None and isinstance(interval, int | float) and interval > 0:
            self._ping_interval = float(interval)

    def _reassemble(self, headers: dict[str, str], part: bytes, now: float) -> bytes | None:
        try:
            total, seq = int(headers.get("sum") or 1), int(headers.get("seq") or 0)
        except ValueError:
            return None
        if total <= 1:
            return part
        msg_id = headers.get("message_id", "")
        if not 0 <= seq < total:
            return None
        for key in [k for k, (t, _) in self._chunks.items() if now - t > _CHUNK_TTL_SECS]:
            del self._chunks[key]
        _, parts = self._chunks.setdefault(msg_id, (now, [None] * total))
        if len(parts) != total:
            return None
        parts[seq] = part
        while len(self._chunks) > _MAX_PENDING_CHUNKS:
            self._chunks.popitem(last=False)
        if any(p is None for p in parts):
            return None
        self._chunks.pop(msg_id, None)
        return b"".join(p for p in parts if p is not None)


def _handshake_reason(exc: aiohttp.WSServerHandshakeError) -> str:
    headers: Mapping[str, str] = exc.headers or {}
    status = headers.get("handshake-status")
    msg = headers.get("handshake-msg", "")
    auth = headers.get("handshake-autherrcode")
    if status == "514" and auth == "1000040350":
        detail = "too many connections for this app"
    elif status == "514":
        detail = f"authentication failed (autherrcode {auth}): check app_id/app_secret"
    else:
        detail = msg or exc.message
    return f"feishu long connection handshake failed (HTTP {exc.status}, status {status}): {detail}"


def _json_or_empty(payload: bytes) -> dict[str, Any]:
    try:
        value = json.loads(payload)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
