"""Inbound WeChat media: CDN download, AES-128-ECB decryption, a file on disk.

Images, files, videos and voice notes arrive as CDN references (`encrypt_query_param`, `aes_key`,
`full_url`); the bytes are AES-128-ECB with PKCS7 padding. The key is either
base64 of 16 raw bytes or base64 of a 32-character hex string; image items may
also carry a hex `aeskey`, which wins. Files land in the channel's media
directory. Only the configured CDN host is ever fetched (no SSRF via full_url).
A voice note's SILK is decoded to WAV (channels.wechat.voice) so that the
gateway's speech-to-text can take it.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from channels.capped import save_bytes
from channels.wechat.api import ILinkClient, ILinkError
from channels.wechat.voice import VoiceError, voice_to_audio
from gateway.bus import MediaKind, MediaRef

__all__ = ["MediaError", "MediaFetcher", "decrypt_ecb", "parse_aes_key"]

ITEM_IMAGE = 2
ITEM_VOICE = 3
ITEM_FILE = 4
ITEM_VIDEO = 5
_ITEM_FIELDS = {
    ITEM_IMAGE: "image_item",
    ITEM_VOICE: "voice_item",
    ITEM_FILE: "file_item",
    ITEM_VIDEO: "video_item",
}

_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png", ".png"),
    (b"\xff\xd8\xff", "image/jpeg", ".jpg"),
    (b"GIF8", "image/gif", ".gif"),
    (b"RIFF", "image/webp", ".webp"),
)


class MediaError(Exception):
    pass


def parse_aes_key(value: str) -> bytes:
    """16 raw key bytes from a hex string, base64(raw) or base64(hex)."""
    value = value.strip()
    if re.fullmatch(r"[0-9a-fA-F]{32}", value):
        return bytes.fromhex(value)
    try:
        decoded = base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise MediaError("aes key is neither hex nor base64") from exc
    if len(decoded) == 16:
        return decoded
    if len(decoded) == 32 and re.fullmatch(rb"[0-9a-fA-F]{32}", decoded):
        return bytes.fromhex(decoded.decode())
    raise MediaError(f"aes key decodes to {len(decoded)} bytes, expected 16")


def decrypt_ecb(data: bytes, key: bytes) -> bytes:
    if not data or len(data) % 16:
        raise MediaError("ciphertext is not a whole number of AES blocks")
    decryptor = Cipher(algorithms.AES(key), modes.ECB()).decryptor()
    padded = decryptor.update(data) + decryptor.finalize()
    unpadder = padding.PKCS7(128).unpadder()
    try:
        return unpadder.update(padded) + unpadder.finalize()
    except ValueError as exc:
        raise MediaError("bad padding after decryption (wrong key?)") from exc


def _safe_name(name: str) -> str:
    cleaned = re.sub(r"[^\w.\-]+", "_", Path(name).name).strip("._")
    return cleaned[:120] or "file"


def _sniff_image(data: bytes) -> tuple[str, str]:
    for magic, mime, ext in _MAGIC:
        if data.startswith(magic):
            return mime, ext
    return "application/octet-stream", ".bin"


class MediaFetcher:
    """Downloads and decrypts one media item into `directory`."""

    def __init__(
        self,
        client: ILinkClient,
        *,
        cdn_base_url: str,
        directory: Path,
        max_bytes: int,
        wait_secs: float = 60.0,
    ) -> None:
        self._client = client
        self._cdn = cdn_base_url.rstrip("/")
        self._cdn_host = urlsplit(self._cdn).netloc
        self._directory = directory
        self._max_bytes = max_bytes
        self._wait_secs = wait_secs

    def _url(self, media: dict[str, Any]) -> str:
        param = media.get("encrypt_query_param") or media.get("encrypted_query_param")
        if param:
            return f"{self._cdn}/download?encrypted_query_param={quote(str(param), safe='')}"
        full_url = str(media.get("full_url") or "")
        if full_url and urlsplit(full_url).netloc == self._cdn_host:
            return full_url
        raise MediaError("media reference has no usable download address")

    async def fetch(self, item: dict[str, Any], stem: str) -> MediaRef:
        """`item` is one entry of a message's item_list (type 2, 3, 4 or 5)."""
        kind_type = item.get("type")
        sub = item.get(_ITEM_FIELDS.get(kind_type if isinstance(kind_type, int) else 0, ""))
        media = sub.get("media") if isinstance(sub, dict) else None
        if not isinstance(sub, dict) or not isinstance(media, dict):
            raise MediaError("malformed media item")
        key_text = str(sub.get("aeskey") or media.get("aes_key") or "")
        key = parse_aes_key(key_text) if key_text else None
        try:
            raw = await self._client.download(self._url(media), self._max_bytes, self._wait_secs)
        except ILinkError as exc:
            raise MediaError(str(exc)) from exc
        data = decrypt_ecb(raw, key) if key is not None else raw
        stem = _safe_name(stem)
        if kind_type == ITEM_IMAGE:
            mime, ext = _sniff_image(data)
            path = self._directory / f"{stem}{ext}"
            await asyncio.to_thread(save_bytes, path, data)
            return MediaRef(MediaKind.IMAGE, str(path), mime, path.name)
        if kind_type == ITEM_VOICE:
            try:
                audio = await asyncio.to_thread(voice_to_audio, data)
            except VoiceError as exc:
                raise MediaError(str(exc)) from exc
            path = self._directory / f"{stem}{audio.suffix}"
            await asyncio.to_thread(save_bytes, path, audio.data)
            return MediaRef(MediaKind.AUDIO, str(path), audio.mime_type, path.name)
        if kind_type == ITEM_VIDEO:
            path = self._directory / f"{stem}.mp4"
            await asyncio.to_thread(save_bytes, path, data)
            return MediaRef(MediaKind.VIDEO, str(path), "video/mp4", path.name)
        name = _safe_name(str(sub.get("file_name") or "file"))
        path = self._directory / f"{stem}_{name}"
        await asyncio.to_thread(save_bytes, path, data)
        return MediaRef(MediaKind.FILE, str(path), None, str(sub.get("file_name") or name))
