"""Outbound WeChat media: encrypt, `getuploadurl`, CDN upload, the message item.

iLink sends files through its CDN: the bytes are encrypted with AES-128-ECB
(PKCS7) under a fresh random key, `getuploadurl` answers an `upload_param`
for the file's sizes and MD5, the ciphertext is POSTed to
`{cdn}/upload?encrypted_query_param=…&filekey=…`, and the CDN answers the
download parameter (`x-encrypted-param`) the image or file item then names,
with the key as base64 of its hex string. (Field names follow Tencent's
plugin; iLink is undocumented — the fake checks the same names.)

An `Uploaded` is kept in the channel state under the part's client_id before
the item is sent, so a retry, also after a crash between upload and send,
sends the same upload instead of uploading again.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import secrets
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from channels.base import StateStore
from channels.wechat.api import ILinkClient
from gateway.bus import MediaKind, MediaRef

__all__ = ["Uploaded", "encrypt_ecb", "item_for", "upload_once"]

MEDIA_IMAGE, MEDIA_FILE = 1, 3  # getuploadurl media_type
ITEM_IMAGE, ITEM_FILE = 2, 4  # item_list types
_SLOT = "upload:"


def encrypt_ecb(data: bytes, key: bytes) -> bytes:
    padder = padding.PKCS7(128).padder()
    padded = padder.update(data) + padder.finalize()
    encryptor = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    return encryptor.update(padded) + encryptor.finalize()


@dataclass(frozen=True, slots=True)
class Uploaded:
    image: bool
    encrypt_query_param: str
    aes_key_hex: str
    raw_size: int
    cipher_size: int
    file_name: str


def item_for(up: Uploaded) -> dict[str, Any]:
    media = {
        "encrypt_query_param": up.encrypt_query_param,
        "aes_key": base64.b64encode(up.aes_key_hex.encode()).decode(),
        "encrypt_type": 1,
    }
    if up.image:
        return {"type": ITEM_IMAGE, "image_item": {"media": media, "mid_size": up.cipher_size}}
    file_item = {"media": media, "file_name": up.file_name, "len": str(up.raw_size)}
    return {"type": ITEM_FILE, "file_item": file_item}


async def _upload(
    client: ILinkClient, cdn_base: str, user: str, media: MediaRef, wait_secs: float
) -> Uploaded:
    data = await asyncio.to_thread(Path(media.path).read_bytes)
    key = secrets.token_bytes(16)
    cipher = await asyncio.to_thread(encrypt_ecb, data, key)
    image = media.kind is MediaKind.IMAGE
    filekey = secrets.token_hex(16)
    upload_param = await client.get_upload_url(
        {
            "filekey": filekey,
            "media_type": MEDIA_IMAGE if image else MEDIA_FILE,
            "to_user_id": user,
            "rawsize": len(data),
            "rawfilemd5": hashlib.md5(data, usedforsecurity=False).hexdigest(),
            "filesize": len(cipher),
            "no_need_thumb": True,
            "aeskey": key.hex(),
        }
    )
    url = (
        f"{cdn_base}/upload?encrypted_query_param={quote(upload_param, safe='')}&filekey={filekey}"
    )
    param = await client.cdn_upload(url, cipher, wait_secs)
    name = media.name or Path(media.path).name
    return Uploaded(image, param, key.hex(), len(data), len(cipher), name)


async def upload_once(
    client: ILinkClient,
    state: StateStore,
    slot: str,
    cdn_base: str,
    user: str,
    media: MediaRef,
    wait_secs: float,
) -> Uploaded:
    """The upload kept under `slot`, or a new one, kept there before it is returned."""
    stored = await state.get(_SLOT + slot)
    if stored:
        return Uploaded(**json.loads(stored))
    up = await _upload(client, cdn_base, user, media, wait_secs)
    await state.set(_SLOT + slot, json.dumps(asdict(up)))
    return up
