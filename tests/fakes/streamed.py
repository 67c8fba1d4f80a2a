"""A download that streams more than it declared: the fakes' peers for the
channels' streamed size caps (issue 51). Chunked, no Content-Length; `sent`
counts the bytes written before the client hung up."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field

from aiohttp import web

__all__ = ["StreamedBody", "stream_body"]

_CHUNK = b"z" * 65536


@dataclass
class StreamedBody:
    """`total` bytes to stream; `sent` so far; `done` set when the stream ended;
    `pause_secs` between chunks (a server that drips)."""

    total: int
    sent: int = 0
    pause_secs: float = 0.0
    done: asyncio.Event = field(default_factory=asyncio.Event)


async def stream_body(
    request: web.Request, body: StreamedBody, headers: Mapping[str, str] = {}
) -> web.StreamResponse:
    response = web.StreamResponse(headers={**headers, "Content-Type": "application/octet-stream"})
    response.enable_chunked_encoding()
    try:
        await response.prepare(request)
        while body.sent < body.total:
            piece = _CHUNK[: body.total - body.sent]
            await response.write(piece)
            body.sent += len(piece)
            if body.pause_secs:
                await asyncio.sleep(body.pause_secs)
        await response.write_eof()
    except ConnectionError:
        pass  # the client hung up: what it took is counted
    finally:
        body.done.set()
    return response
