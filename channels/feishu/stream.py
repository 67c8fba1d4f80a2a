"""Streaming a reply on Feishu by updating one card (`channels.feishu.streaming`).

The first text of a turn is posted as a shared Markdown card (a reply to the
user's message); later text replaces the card's content with
`PATCH /im/v1/messages/{id}` at most once per interval (Feishu allows 5
updates a second per message). When the final reply is sent, `take` ends the
stream and hands back the card: its first part goes into that card, so the
chat is left with one message, not a preview and a copy. Best effort: a
failed update is logged and the final reply is sent as usual. Every task is
owned, named, cancelled and awaited.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import structlog

from channels.base import ChannelError

__all__ = ["CardStreams"]

log = structlog.get_logger("channels.feishu")

Post = Callable[[str, str | None, str], Awaitable[str]]  # (chat, reply target, text) → id
Patch = Callable[[str, str], Awaitable[None]]  # (message id, text)

_MAX_CHARS = 20_000  # a card holds ~30 KB: the preview shows the start of a longer reply


@dataclass(slots=True)
class _Stream:
    run_id: str
    target: str | None
    text: str = ""
    shown: str = ""
    message_id: str | None = None
    last_push: float = float("-inf")
    closed: bool = False
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    flusher: asyncio.Task[None] | None = None


class CardStreams:
    def __init__(self, post: Post, patch: Patch, min_interval: float = 1.0) -> None:
        self._post = post
        self._patch = patch
        self._interval = min_interval
        self._streams: dict[str, _Stream] = {}

    async def delta(self, chat_id: str, run_id: str, chunk: str, target: str | None) -> None:
        stream = self._streams.get(chat_id)
        if stream is None or stream.run_id != run_id:
            if stream is not None:
                await self._close(stream)
            stream = self._streams[chat_id] = _Stream(run_id, target)
        stream.text += chunk
        if stream.flusher is None or stream.flusher.done():
            stream.flusher = asyncio.create_task(
                self._flush(chat_id, stream), name=f"feishu-stream-{chat_id}"
            )

    async def take(self, chat_id: str, run_id: str | None) -> str | None:
        """End the chat's stream of `run_id`; the id of the card showing it."""
        stream = self._streams.get(chat_id)
        if stream is None or run_id is None or stream.run_id != run_id:
            return None
        del self._streams[chat_id]
        await self._close(stream)
        return stream.message_id

    async def close(self) -> None:
        streams, self._streams = list(self._streams.values()), {}
        for stream in streams:
            await self._close(stream)

    async def _close(self, stream: _Stream) -> None:
        stream.closed = True
        async with stream.lock:  # a push in flight finishes: we learn the card's id
            task = stream.flusher
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _flush(self, chat_id: str, stream: _Stream) -> None:
        loop = asyncio.get_running_loop()
        while not stream.closed:
            wait = stream.last_push + self._interval - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            async with stream.lock:
                text = stream.text[:_MAX_CHARS]
                if stream.closed or text == stream.shown or not text.strip():
                    return
                try:
                    if stream.message_id is None:
                        stream.message_id = await self._post(chat_id, stream.target, text)
                    else:
                        await self._patch(stream.message_id, text)
                except ChannelError as exc:
                    log.info("feishu stream update failed", chat_id=chat_id, error=str(exc))
                    return
                stream.shown = text
                stream.last_push = loop.time()
