"""Files the agent sends (`send_file`) become outbox rows like any reply.

The file is first copied under `<media_dir>/outbox/<key>/` (off the event
loop): the row must still find its file on every retry, also after a
restart, whatever the agent does to the workspace meanwhile. Then one
`OutboundMessage` with the file as `media` and the caption as text is queued
durably; the channel uploads and sends it (exactly once: see each channel's
docs). A channel that cannot send files is refused before anything is queued.

The tool's answer says how the file will go out when the channel can tell
(`MediaPreview`: Telegram "as a document", Feishu "as a file", from each
channel's media limits); a file the channel will not take at all is refused
here, its copy deleted, nothing queued. The send itself happens later, from the outbox:
the answer says "queued", never "delivered".
"""

from __future__ import annotations

import asyncio
import contextlib
import mimetypes
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol, runtime_checkable

from agent.tools.base import ToolError
from channels.base import Channel, PermanentSendError
from gateway.bus import MediaKind, MediaRef, OutboundMessage, new_idempotency_key
from gateway.delivery.outbound import OutboundDispatcher

__all__ = ["MediaPreview", "OutboxFileSender", "copy_for_outbox", "media_kind"]


@runtime_checkable
class MediaPreview(Protocol):
    """A channel that can say, before the send, how a file will go out."""

    def preview_media(self, media: MediaRef, size: int) -> str:
        """A short phrase ("as a document: …"); raises PermanentSendError when
        the channel will not send the file at all. Blocking (reads the file)."""
        ...


def media_kind(mime_type: str | None) -> MediaKind:
    major = (mime_type or "").partition("/")[0]
    return {"image": MediaKind.IMAGE, "audio": MediaKind.AUDIO, "video": MediaKind.VIDEO}.get(
        major, MediaKind.FILE
    )


def copy_for_outbox(source: Path, directory: Path, max_bytes: int) -> Path:
    """Copy the file `source` names (resolved and checked by the tool) from one
    descriptor, opened without following a symlink and checked to be that very
    file: a tool running in the same batch could swap the path, or a folder on
    it, for a symlink to a file the agent must not send after the check."""
    try:
        fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise ToolError(f"{source.name} cannot be opened: {exc.strerror}") from None
    try:
        opened = Path(f"/proc/self/fd/{fd}")
        if opened.exists() and Path(os.readlink(opened)) != source:
            raise ToolError(f"{source.name} changed while it was being sent; not sent")
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ToolError(f"{source.name} is not a regular file")
        if info.st_size > max_bytes:
            raise ToolError(
                f"{source.name} is {info.st_size} bytes; files over {max_bytes} bytes are not sent"
            )
        if info.st_size == 0:
            raise ToolError(f"{source.name} is empty")
        directory.mkdir(parents=True, exist_ok=True)
        target = directory / source.name
        copied = 0
        with os.fdopen(fd, "rb", closefd=False) as src, target.open("wb") as dst:
            while chunk := src.read(1 << 20):
                copied += len(chunk)
                if copied > max_bytes:  # it grew after the size check
                    dst.close()
                    target.unlink()
                    raise ToolError(f"{source.name} grew past {max_bytes} bytes; not sent")
                dst.write(chunk)
        return target
    finally:
        os.close(fd)


class OutboxFileSender:
    def __init__(
        self,
        dispatcher: OutboundDispatcher,
        channels: Mapping[str, Channel],
        media_dir: Path,
        *,
        max_bytes: int = 20_000_000,
    ) -> None:
        self._dispatcher = dispatcher
        self._channels = channels
        self._dir = media_dir / "outbox"
        self._max_bytes = max_bytes

    async def send_file(
        self, channel: str, chat_id: str, path: Path, *, caption: str, reply_to: str | None
    ) -> str:
        target = self._channels.get(channel)
        mime_type = mimetypes.guess_type(path.name)[0]
        kind = media_kind(mime_type)
        if target is None or kind not in target.capabilities.send_media:
            raise ToolError(
                f"this chat ({channel}) cannot receive files of this kind ({kind.value})"
            )
        key = new_idempotency_key()
        copy = await asyncio.to_thread(copy_for_outbox, path, self._dir / key, self._max_bytes)
        ref = MediaRef(kind, str(copy), mime_type, path.name)
        how = ""
        if isinstance(target, MediaPreview):
            try:
                size = await asyncio.to_thread(lambda: copy.stat().st_size)
                how = " " + await asyncio.to_thread(target.preview_media, ref, size)
            except PermanentSendError as exc:
                await asyncio.to_thread(_discard, copy)
                raise ToolError(f"{path.name}: {exc}") from None
        message = OutboundMessage(
            channel,
            chat_id,
            caption,
            reply_to_message_id=reply_to,
            idempotency_key=key,
            media=(ref,),
        )
        await self._dispatcher.enqueue(message)
        return f"{path.name} ({kind.value}) queued for delivery to this chat{how}"


def _discard(copy: Path) -> None:
    copy.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        copy.parent.rmdir()
