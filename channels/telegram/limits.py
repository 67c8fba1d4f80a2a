"""What Telegram takes as a photo, as a document, or not at all: the one table
of the channel's media limits, and the choice made from it before a send.

An image goes as a photo only when the Bot API will take it as one (size, and
the dimensions read from its PNG or JPEG header); otherwise as a document. An
image whose dimensions cannot be read goes as a photo, and the sender retries
it as a document when Telegram refuses it (`is_photo_refusal`). A file over
every limit is not uploaded: the chat gets `too_large_note` instead. Reads no
file itself: callers pass the bytes they have.
"""

from __future__ import annotations

import enum
import struct
import zlib
from dataclasses import dataclass

from channels.too_large import Megabytes, TooLarge
from gateway.bus import MediaKind

__all__ = [
    "LIMITS",
    "MediaLimits",
    "SendAs",
    "image_size",
    "is_photo_refusal",
    "photo_problem",
    "plan",
    "preview",
    "too_large_note",
]


_mb = Megabytes(1_000_000)


@dataclass(frozen=True, slots=True)
class MediaLimits:
    photo_bytes: int
    photo_side_sum: int  # width + height
    photo_ratio: float  # longer side / shorter side
    upload_bytes: int  # any file uploaded with multipart/form-data


# https://core.telegram.org/bots/api#sendphoto: "The photo must be at most 10 MB in size.
# The photo's width and height must not exceed 10000 in total. Width and height ratio must
# be at most 20." https://core.telegram.org/bots/api#sending-files: "50 MB max size for
# other types of content" (uploads). Decimal MB: the safe reading of "MB".
LIMITS = MediaLimits(
    photo_bytes=10_000_000,
    photo_side_sum=10_000,
    photo_ratio=20.0,
    upload_bytes=50_000_000,
)

# The Bot API's refusals of a photo it could take as a document (PTB capitalises them:
# "Bad Request: PHOTO_INVALID_DIMENSIONS" arrives as "Photo_invalid_dimensions").
_PHOTO_REFUSALS = ("photo_invalid_dimensions", "photo_save_file_invalid", "image_process_failed")


class SendAs(enum.Enum):
    PHOTO = "photo"
    DOCUMENT = "document"
    NOTHING = "nothing"  # over every limit: a note goes instead


def photo_problem(
    size: int, dims: tuple[int, int] | None, limits: MediaLimits = LIMITS
) -> str | None:
    """Why Telegram would refuse these bytes as a photo, or None."""
    if size > limits.photo_bytes:
        return f"photos over {_mb(limits.photo_bytes)} are refused"
    if dims is None:
        return None
    width, height = dims
    if width <= 0 or height <= 0:
        return "it has no pixels"
    if width + height > limits.photo_side_sum:
        return f"{width}×{height} px: width + height over {limits.photo_side_sum}"
    if max(width, height) / min(width, height) > limits.photo_ratio:
        return f"{width}×{height} px: aspect ratio over {limits.photo_ratio:g}"
    return None


def plan(
    kind: MediaKind, size: int, dims: tuple[int, int] | None, limits: MediaLimits = LIMITS
) -> SendAs:
    if size > limits.upload_bytes:
        return SendAs.NOTHING
    if kind is MediaKind.IMAGE and photo_problem(size, dims, limits) is None:
        return SendAs.PHOTO
    return SendAs.DOCUMENT


def preview(
    kind: MediaKind, size: int, dims: tuple[int, int] | None, limits: MediaLimits = LIMITS
) -> str:
    """What `send_file` tells the model before the outbox sends the file."""
    send_as = plan(kind, size, dims, limits)
    if send_as is SendAs.NOTHING:
        raise TooLarge("Telegram", limits.upload_bytes, _mb).refusal(size)
    if send_as is SendAs.PHOTO:
        if dims is None:
            return "as a photo (as a document if Telegram refuses it as a photo)"
        return "as a photo"
    if kind is MediaKind.IMAGE:
        return (
            f"as a document: Telegram refuses it as a photo ({photo_problem(size, dims, limits)})"
        )
    return "as a document"


def is_photo_refusal(description: str) -> bool:
    lowered = description.lower()
    return any(refusal in lowered for refusal in _PHOTO_REFUSALS)


def too_large_note(name: str, size: int, limits: MediaLimits = LIMITS) -> str:
    return TooLarge("Telegram", limits.upload_bytes, _mb).note(name, size)


_PNG = b"\x89PNG\r\n\x1a\n"
# SOF markers carry the frame size; C4 (DHT), C8 (JPG) and CC (DAC) do not.
_JPEG_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def image_size(head: bytes) -> tuple[int, int] | None:
    """(width, height) from a PNG's IHDR (its CRC checked) or a JPEG's SOF
    segment, reading only the header; None when neither is found intact."""
    if head.startswith(_PNG):
        chunk = head[8:33]  # length, type, 13 bytes of data, CRC
        if len(chunk) < 25 or chunk[:8] != b"\x00\x00\x00\x0dIHDR":
            return None
        width, height, crc = struct.unpack(">II5xI", chunk[8:])
        if zlib.crc32(chunk[4:21]) != crc:
            return None
        return width, height
    if head.startswith(b"\xff\xd8"):
        return _jpeg_size(head)
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    at = 2
    while at + 4 <= len(data):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if marker in (0x01, *range(0xD0, 0xD8)):  # no length field
            at += 2
            continue
        if marker in (0xD9, 0xDA):  # end of image, start of scan: no SOF before it
            return None
        (length,) = struct.unpack(">H", data[at + 2 : at + 4])
        if marker in _JPEG_SOF:
            if at + 9 > len(data) or length < 7:
                return None
            height, width = struct.unpack(">HH", data[at + 5 : at + 9])
            return width, height
        at += 2 + length
    return None
