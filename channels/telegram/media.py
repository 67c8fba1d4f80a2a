"""Download Telegram attachments (getFile + file URL) into media_dir/telegram/.

Size caps are checked four times: the size the message announces, the size
getFile reports, the Content-Length of the download, and the bytes as they
stream in (the download stops once it passes the cap: a file whose getFile
says 1 KB but streams 200 MB costs at most the cap in memory). A file that is
too large or cannot be fetched does not fail the message: the agent gets a
short note instead, and the log line says why. Disk writes run in a thread.
The file URL carries the bot token: it is never logged.
"""

from __future__ import annotations

import asyncio
import mimetypes
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import quote, urlsplit, urlunsplit

import httpx
import structlog
from telegram import Bot
from telegram.error import TelegramError

from channels.capped import CHUNK, BodyTooLarge, read_capped, save_bytes
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


class _DownloadFailed(Exception):
    pass


class MediaFetcher:
    """Owns the HTTP client of the downloads: `aclose()` it when the channel stops."""

    def __init__(
        self,
        bot: Bot,
        directory: Path,
        max_bytes: int,
        redact: Redactor,
        *,
        deadline_secs: float = 120.0,
    ) -> None:
        self._bot = bot
        self._deadline = deadline_secs  # the whole download, not each read
        self._redact = redact
        self._dir = directory
        self._max = max_bytes
        # PTB's own request object reads a file whole; this one streams it.
        self._http = httpx.AsyncClient(
            timeout=httpx.Timeout(30.0, connect=10.0),
            headers={"Accept-Encoding": "identity"},  # no decompression: bytes in = bytes held
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def fetch(self, chat_id: str, message_id: int, att: Attachment) -> Fetched:
        if att.file_size is not None and att.file_size > self._max:
            return self._too_large(att, att.file_size)
        try:
            tg_file = await self._bot.get_file(att.file_id)
            if tg_file.file_size is not None and tg_file.file_size > self._max:
                return self._too_large(att, tg_file.file_size)
            if not tg_file.file_path:
                raise _DownloadFailed("getFile gave no file_path")
            data = await self._download(tg_file.file_path)
        except BodyTooLarge as exc:
            return self._too_large(att, exc.size)
        except (TelegramError, _DownloadFailed) as exc:
            reason = exc.message if isinstance(exc, TelegramError) else str(exc)
            log.warning(
                "telegram attachment not downloaded",
                chat_id=chat_id,
                kind=att.kind.value,
                error=type(exc).__name__,
                reason=self._redact(reason),
            )
            return Fetched(None, f"[{att.label} could not be downloaded]")
        suffix = _suffix(att, tg_file.file_path)
        name = f"{_safe(chat_id)}_{message_id}_{_safe(att.file_unique_id)}{suffix}"
        path = self._dir / name
        await asyncio.to_thread(save_bytes, path, data)
        mime = att.mime_type or mimetypes.guess_type(name)[0]
        return Fetched(MediaRef(att.kind, str(path), mime, att.name), None)

    async def _download(self, file_url: str) -> bytes:
        """The file's bytes, read in chunks and stopped past the cap (BodyTooLarge)
        or past the deadline: a server that drips a byte a second would hold the
        update loop, and every chat of the channel, for as long as it liked."""
        try:
            async with (
                asyncio.timeout(self._deadline),
                self._http.stream("GET", _encoded(file_url)) as resp,
            ):
                if resp.status_code != 200:
                    raise _DownloadFailed(f"HTTP {resp.status_code}")
                length = resp.headers.get("Content-Length", "")
                declared = int(length) if length.isdigit() else None
                return await read_capped(resp.aiter_bytes(CHUNK), self._max, declared=declared)
        except TimeoutError:
            raise _DownloadFailed(f"not downloaded within {self._deadline:g} s") from None
        except httpx.HTTPError as exc:
            # the message of an httpx error may hold the URL, and so the token
            raise _DownloadFailed(type(exc).__name__) from None

    def _too_large(self, att: Attachment, size: int) -> Fetched:
        log.info(
            "telegram attachment skipped: too large",
            kind=att.kind.value,
            size=size,
            max_media_bytes=self._max,
        )
        return Fetched(None, f"[{att.label} omitted: larger than {self._max} bytes]")


def _encoded(url: str) -> str:
    """The file URL with its path percent-encoded, as PTB's own download does."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=quote(parts.path)))


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
