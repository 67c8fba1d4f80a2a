"""Loading a message's media files for vision models.

Splits `ChatMessage.media` paths into images (read and base64-encoded off the event
loop) and everything else (which providers only mention in text). It never raises
for a missing or oversized file: such a path is mentioned instead of sent.
"""

from __future__ import annotations

import asyncio
import base64
import mimetypes
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "IMAGE_EXTENSIONS",
    "IMAGE_MAX_BYTES",
    "IMAGE_TYPES",
    "Image",
    "LoadedMedia",
    "load_media",
    "mention_files",
]

IMAGE_MAX_BYTES = 20 * 1024 * 1024
# what every vision API here takes (OpenAI, Anthropic, the compatible ones)
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_EXTENSIONS = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}
IMAGE_EXTENSIONS = {mime: ext for ext, mime in reversed(_EXTENSIONS.items())}  # .jpg, not .jpeg


@dataclass(frozen=True, slots=True)
class Image:
    path: str
    mime_type: str
    data_b64: str

    @property
    def data_uri(self) -> str:
        return f"data:{self.mime_type};base64,{self.data_b64}"


@dataclass(frozen=True, slots=True)
class LoadedMedia:
    images: tuple[Image, ...]
    other_paths: tuple[str, ...]  # non-images and unreadable files, mentioned in text


def image_mime_type(path: str) -> str | None:
    suffix = Path(path).suffix.lower()
    mime = _EXTENSIONS.get(suffix) or mimetypes.guess_type(path)[0]
    return mime if mime in IMAGE_TYPES else None


def _read_image(path: str, mime: str) -> Image | None:
    file = Path(path)
    try:
        if file.stat().st_size > IMAGE_MAX_BYTES:
            return None
        data = file.read_bytes()
    except OSError:
        return None
    return Image(path, mime, base64.b64encode(data).decode("ascii"))


def _load(paths: Sequence[str]) -> LoadedMedia:
    images: list[Image] = []
    others: list[str] = []
    for path in paths:
        mime = image_mime_type(path)
        image = _read_image(path, mime) if mime else None
        if image is None:
            others.append(path)
        else:
            images.append(image)
    return LoadedMedia(tuple(images), tuple(others))


async def load_media(paths: Sequence[str]) -> LoadedMedia:
    """Read image files in a worker thread; everything else goes to `other_paths`."""
    if not paths:
        return LoadedMedia((), ())
    return await asyncio.to_thread(_load, tuple(paths))


def mention_files(text: str, paths: Sequence[str]) -> str:
    """Append a line naming attached files the model cannot see directly."""
    if not paths:
        return text
    note = "[attached files: " + ", ".join(paths) + "]"
    return f"{text}\n\n{note}" if text else note
