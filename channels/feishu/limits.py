"""What Feishu takes as an image, as a file, or not at all: the one table of the
channel's media limits, and the choice made from it before an upload.

An image up to the image limit is uploaded with `im/v1/images` and sent as an
`image` message; a larger one, and any other file up to the file limit, with
`im/v1/files` (`file_type` by extension, "stream" for a PNG) as a `file`
message. A file over every limit is not uploaded: the chat gets
`too_large_note` instead.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from channels.too_large import Megabytes, TooLarge
from gateway.bus import MediaKind

__all__ = ["LIMITS", "MediaLimits", "SendAs", "plan", "preview", "too_large_note"]


_mb = Megabytes(1024 * 1024)


@dataclass(frozen=True, slots=True)
class MediaLimits:
    image_bytes: int
    file_bytes: int


# https://open.feishu.cn/document/server-docs/im-v1/image/create ("图片大小不得超过10M",
# else code 234006) and https://open.feishu.cn/document/server-docs/im-v1/file/create
# ("文件大小不得超过30M", code 234006 "The file size exceed the max value.").
LIMITS = MediaLimits(image_bytes=10 * 1024 * 1024, file_bytes=30 * 1024 * 1024)


class SendAs(enum.Enum):
    IMAGE = "image"
    FILE = "file"
    NOTHING = "nothing"  # over every limit: a note goes instead


def plan(kind: MediaKind, size: int, limits: MediaLimits = LIMITS) -> SendAs:
    if kind is MediaKind.IMAGE and size <= limits.image_bytes:
        return SendAs.IMAGE
    if size <= limits.file_bytes:
        return SendAs.FILE
    return SendAs.NOTHING


def preview(kind: MediaKind, size: int, limits: MediaLimits = LIMITS) -> str:
    """What `send_file` tells the model before the outbox sends the file."""
    send_as = plan(kind, size, limits)
    if send_as is SendAs.NOTHING:
        raise TooLarge("Feishu", limits.file_bytes, _mb).refusal(size)
    if send_as is SendAs.IMAGE:
        return "as an image"
    if kind is MediaKind.IMAGE:
        return f"as a file: Feishu takes images of at most {_mb(limits.image_bytes)}"
    return "as a file"


def too_large_note(name: str, size: int, limits: MediaLimits = LIMITS) -> str:
    return TooLarge("Feishu", limits.file_bytes, _mb).note(name, size)
