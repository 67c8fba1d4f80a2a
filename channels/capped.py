"""Reading a peer's body under a byte cap, while it streams.

Every body a channel reads from a platform (a downloaded attachment, a JSON
answer of an API) goes through `read_capped`: it stops as soon as more than
`cap` bytes have arrived, so a peer that declares 1 KB and streams 200 MB costs
at most the cap plus one chunk of memory. It must never read a whole body
before checking its size. What was read is kept by `save_bytes` (blocking:
call it through `asyncio.to_thread`).
"""

from __future__ import annotations

from collections.abc import AsyncIterable
from pathlib import Path

__all__ = ["API_BODY_MAX", "CHUNK", "BodyTooLarge", "read_capped", "save_bytes"]

CHUNK = 65536  # bytes per read from the socket
# A platform's JSON answer (an update page, a token, an error): far above any
# real one, far below what would hurt the process.
API_BODY_MAX = 8 * 1024 * 1024


class BodyTooLarge(Exception):
    """The body was larger than the cap; what was read is dropped."""

    def __init__(self, cap: int, size: int) -> None:
        super().__init__(f"body larger than {cap} bytes")
        self.cap = cap
        self.size = size  # the declared length, or what had arrived when reading stopped


async def read_capped(
    chunks: AsyncIterable[bytes], cap: int, *, declared: int | None = None
) -> bytes:
    """The whole body, or `BodyTooLarge` as soon as it passes `cap` bytes (or
    when the `declared` length already does, before reading anything)."""
    if declared is not None and declared > cap:
        raise BodyTooLarge(cap, declared)
    body = bytearray()
    async for chunk in chunks:
        body += chunk
        if len(body) > cap:
            raise BodyTooLarge(cap, len(body))
    return bytes(body)


def save_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` whole or not at all (a `.part` file renamed into
    place), creating its folder: a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    tmp.write_bytes(data)
    tmp.replace(path)
