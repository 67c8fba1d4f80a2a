"""A reply shown as it is generated: one message per chat and turn, posted at
the first text and edited at most once per interval (platform flood limits),
always ending on the latest text; used by Telegram (a message edited in
place) and Feishu (a card updated with PATCH).

When the final reply is sent, `take` ends the turn's stream and hands back
the message that shows it, so the channel can put the reply's first part
there and the chat keeps one message, not a preview and a copy. A reply of
another turn (or of none: a command's answer, a scheduled message) never
takes it. Best effort: a failed post or edit is logged and the final reply
is sent as usual. Every task is owned, named, cancelled and awaited.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import structlog

from channels.base import ChannelError
from channels.tasks import cancel_and_wait

__all__ = ["PreviewStreams"]

log = structlog.get_logger("channels.stream_preview")

T = TypeVar("T")  # where a stream is shown in its chat (a topic, a reply target)
M = TypeVar("M")  # the platform's id of the message showing it


@dataclass(slots=True)
class _Stream(Generic[T, M]):
    run_id: str
    where: T
    text: str = ""
    shown: str = ""
    message_id: M | None = None
    last_push: float = float("-inf")
    closed: bool = False
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    flusher: asyncio.Task[None] | None = None


class PreviewStreams(Generic[T, M]):
    def __init__(
        self,
        post: Callable[[str, T, str], Awaitable[M]],
        edit: Callable[[str, M, str], Awaitable[None]],
        *,
        min_interval: float,
        max_chars: int,
        name: str,
    ) -> None:
        """`post(chat_id, where, text)` the first text, `edit(chat_id, id, text)`
        the later ones; at most `max_chars` of the reply are shown."""
        self._post = post
        self._edit = edit
        self._interval = min_interval
        self._max_chars = max_chars
        self._name = name
        self._streams: dict[str, _Stream[T, M]] = {}

    async def delta(self, chat_id: str, run_id: str, chunk: str, where: T) -> None:
        stream = self._streams.get(chat_id)
        if stream is None or stream.run_id != run_id:
            if stream is not None:
                await self._close(stream)
            stream = self._streams[chat_id] = _Stream(run_id, where)
        stream.text += chunk
        if stream.flusher is None or stream.flusher.done():
            stream.flusher = asyncio.create_task(
                self._flush(chat_id, stream), name=f"{self._name}-{chat_id}"
            )

    async def take(self, chat_id: str, run_id: str | None) -> M | None:
        """End the chat's stream of `run_id`; the id of the message showing it."""
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

    async def _close(self, stream: _Stream[T, M]) -> None:
        stream.closed = True
        async with stream.lock:  # a push in flight finishes: we learn the message's id
            await cancel_and_wait(stream.flusher)

    async def _flush(self, chat_id: str, stream: _Stream[T, M]) -> None:
        loop = asyncio.get_running_loop()
        while not stream.closed:
            wait = stream.last_push + self._interval - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            async with stream.lock:
                text = stream.text[: self._max_chars]
                if stream.closed or text == stream.shown or not text.strip():
                    return  # text that arrived during a push went out in this round
                try:
                    if stream.message_id is None:
                        stream.message_id = await self._post(chat_id, stream.where, text)
                    else:
                        await self._edit(chat_id, stream.message_id, text)
                except ChannelError as exc:
                    log.info("stream preview update failed", stream=self._name, error=str(exc))
                    return
                stream.shown = text
                stream.last_push = loop.time()
