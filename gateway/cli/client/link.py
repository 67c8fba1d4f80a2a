"""The terminal client's connection to `/ws` (docs/PROTOCOL.md), kept up.

`Link.open` connects and says hello (an error means the client cannot start);
`Link.run` then reads frames into a bounded queue and, when the connection
drops, reconnects with backoff and says hello again with the same chat id, so
replies written meanwhile arrive (marked `earlier` by the gateway). Messages
sent while disconnected wait, a bounded few, and go out after the next
welcome; their ids make a resend harmless. Events the reader needs to know
about — `disconnected`, `reconnected`, `refused` — come through the same
queue as frames, in order.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections import deque
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import websockets

__all__ = ["COMMAND", "ClientError", "Link", "Refused", "is_command", "stop_task"]

MAX_UNSENT = 50
CLOSE_UNAUTHORIZED = 4401  # channels.websocket: the token was refused
BACKOFF_FIRST_SECS = 0.5
BACKOFF_MAX_SECS = 10.0
Frame = dict[str, Any]
# a chat command as the gateway reads one: `/name`, `/name@bot`, then space or the end
COMMAND = re.compile(r"^/([A-Za-z][\w-]*)(?:@\S+)?(?:\s|$)")


def is_command(text: str) -> bool:
    """Text the gateway takes as a command (answered at once, by no turn)."""
    return COMMAND.match(text.strip()) is not None


async def stop_task(task: asyncio.Task[None]) -> None:
    """Cancel `task` and wait for its end; a cancellation of the caller itself
    is re-raised, not swallowed with the task's."""
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise


class ClientError(Exception):
    pass


class Refused(ClientError):
    """The gateway answered and said no (token, protocol): trying again will not help."""


class Link:
    def __init__(self, url: str, token: str | None, chat_id: str) -> None:
        self.url = url
        self.token = token
        self.chat_id = chat_id
        self.frames: asyncio.Queue[Frame] = asyncio.Queue(256)
        self.commands: frozenset[str] | None = None  # the gateway's, from its welcome
        self.online = False
        self._ws: websockets.ClientConnection | None = None
        self._unsent: deque[str] = deque()

    @property
    def shown_url(self) -> str:
        """The URL for messages: without user:password@ or a query."""
        parts = urlsplit(self.url)
        netloc = parts.netloc.rpartition("@")[2]
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))

    async def open(self) -> None:
        """The first connection; `ClientError` when it cannot be had."""
        self._ws = await self._connect()
        self.online = True

    async def _connect(self) -> websockets.ClientConnection:
        try:
            ws = await websockets.connect(self.url, max_size=8 * 1024 * 1024)
        except websockets.InvalidStatus as exc:
            status = exc.response.status_code
            # a page or nothing instead of the upgrade: the URL names another path
            wrong_path = status < 300 or status == 404
            hint = " (is that the WebSocket path, channels.websocket.path?)" if wrong_path else ""
            raise ClientError(f"cannot connect to {self.shown_url}: HTTP {status}{hint}") from None
        except (OSError, websockets.InvalidURI, websockets.InvalidHandshake) as exc:
            raise ClientError(f"cannot connect to {self.shown_url}: {exc}") from None
        hello: Frame = {"type": "hello", "protocol": 1, "chat_id": self.chat_id}
        if self.token:
            hello["token"] = self.token
        try:
            await ws.send(json.dumps(hello))
            welcome = json.loads(await asyncio.wait_for(ws.recv(), 10))
        except websockets.ConnectionClosed as exc:
            code = exc.rcvd.code if exc.rcvd else None
            if code in (CLOSE_UNAUTHORIZED, 1008):
                raise Refused(f"the gateway closed the connection ({code}): wrong token?") from None
            raise ClientError(f"the gateway closed the connection ({code})") from None
        except TimeoutError:
            await ws.close()
            raise ClientError("the gateway did not answer the hello") from None
        if welcome.get("type") != "welcome":
            await ws.close()
            raise Refused(f"the gateway refused the connection: {welcome.get('message')}")
        names = welcome.get("commands")
        if isinstance(names, list):
            self.commands = frozenset(str(c.get("name")) for c in names if isinstance(c, dict))
        return ws

    async def run(self) -> None:
        """Read frames until cancelled, reconnecting whenever the line drops."""
        delay = BACKOFF_FIRST_SECS
        while True:
            if self._ws is None:
                try:
                    self._ws = await self._connect()
                except Refused as exc:
                    await self.frames.put({"type": "refused", "message": str(exc)})
                    return
                except ClientError:
                    await asyncio.sleep(delay)  # the gateway is not back yet
                    delay = min(delay * 2, BACKOFF_MAX_SECS)
                    continue
                self.online = True
                delay = BACKOFF_FIRST_SECS
                await self.frames.put({"type": "reconnected"})
                await self._flush_unsent()
            try:
                async for raw in self._ws:
                    try:
                        frame = json.loads(raw)
                    except ValueError:
                        continue
                    if isinstance(frame, dict):
                        await self.frames.put(frame)
            except websockets.ConnectionClosed:
                pass
            self._ws = None
            self.online = False
            await self.frames.put({"type": "disconnected"})

    async def send(self, text: str) -> str:
        """Send a chat message (or queue it while disconnected); its client id."""
        msg_id = uuid.uuid4().hex[:16]
        frame = json.dumps({"type": "message", "id": msg_id, "text": text})
        if self._ws is not None and self.online:
            try:
                await self._ws.send(frame)
                return msg_id
            except websockets.ConnectionClosed:
                pass  # the reader notices and reconnects; the message waits
        if len(self._unsent) >= MAX_UNSENT:
            raise ClientError("not connected, and too many messages are waiting already")
        self._unsent.append(frame)
        return msg_id

    async def query(self, frame: Frame) -> None:
        """Send a query frame (`history`, `sessions`) now; `ClientError` offline."""
        if self._ws is None or not self.online:
            raise ClientError("not connected")
        try:
            await self._ws.send(json.dumps(frame))
        except websockets.ConnectionClosed:
            raise ClientError("not connected") from None

    async def _flush_unsent(self) -> None:
        while self._unsent and self._ws is not None:
            await self._ws.send(self._unsent[0])
            self._unsent.popleft()

    async def close(self) -> None:
        if self._ws is not None:
            await self._ws.close()
