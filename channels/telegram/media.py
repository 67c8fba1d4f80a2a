"""Download Telegram attachments (getFile + file URL) into media_dir/telegram/.

Size caps are checked three times: the size the message announces, the size
getFile reports, and the bytes actually received. A file that is too large or
cannot be fetched does not fail the message: the agent gets a short note
instead, and the log line says why. Disk writes run in a thread.
"""

from __future__ import annotations

import asyncio
import mimetypes
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import structlog
from telegram import Bot
from telegram.error import TelegramError

from channels.telegram.inbound import Attachment
from channels.telegram.redaction import Redactor
from gateway.bus import MediaRef

__all__ = ["MediaFetcher"]

log = structlog.get_logger("channels.telegram")
_SAFE_SUFFIX = re.compile(r"^\.[A-Za-z0-9]{1,8}$")


@dataclass(frozen=True, slots=True)
class Fetched:
    ref: MediaRef | None
    note: str | None  # set when the attachment was left out


class MediaFetcher:
    def __init__(self, bot: Bot, directory: Path, max_bytes: int, redact: Redactor) -> None:
        self._bot = bot
        self._redact = redact
        self._dir = directory
        self._max = max_bytes

    async def fetch(self, chat_id: str, message_id: int, att: Attachment) -> Fetched:
        if att.file_size is not None and att.file_size > self._max:
            return self._too_large(att, att.file_size)
        try:
            tg_file = await self._bot.get_file(att.file_id)
            if tg_file.file_size is not None and tg_file.file_size > self._max:
                return self._too_large(att, tg_file.file_size)
            data = bytes(await tg_file.download_as_bytearray())
        except TelegramError as exc:
            log.warning(
                "telegram attachment not downloaded",
                chat_id=chat_id,
                kind=att.kind.value,
                error=type(exc).__name__,
                reason=self._redact(exc.message),
            )
            return Fetched(None, f"[{att.label} could not be downloaded]")
        if len(data) > self._max:
            return self._too_large(att, len(data))
        suffix = _suffix(att, tg_file.file_path)
        name = f"{_safe(chat_id)}_{message_id}_{_safe(att.file_unique_id)}{suffix}"
        path = self._dir / name
        await asyncio.to_thread(_write, path, data)
        mime = att.mime_type or mimetypes.guess_type(name)[0]
        return Fetched(MediaRef(att.kind, str(path), mime, att.name), None)

    def _too_large(self, att: Attachment, size: int) -> Fetched:
        log.info(
            "telegram attachment skipped: too large",
            kind=att.kind.value,
            size=size,
            max_media_bytes=self._max,
        )
        return Fetched(None, f"[{att.label} omitted: larger than {self._max} bytes]")


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".part")
    tmp.write_bytes(data)
    tmp.replace(path)


def _safe(value: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", value)


def _suffix(att: Attachment, file_path: str | None) -> str:
    candidates = [att.name or "", PurePosixPath(file_path or "").name]
    for candidate in candidates:
        suffix = PurePosixPath(candidate).suffix
        if _SAFE_SUFFIX.match(suffix):
            return suffix.lower()
    guessed = mimetypes.guess_extension(att.mime_type or "") or ""
    return guessed if _SAFE_SUFFIX.match(guessed) else ""
