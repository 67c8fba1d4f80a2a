"""What the model reads (and sees) of an MCP tool result.

Tool results travel through the agent loop and storage as text, plus image
files for a model that reads images. Every content block becomes text: text
as is; an embedded text resource as its URI and text; a resource link as its
URI. An image the model can be shown (`images=True`: PNG, JPEG, GIF or WebP,
valid base64, at most `IMAGE_MAX_BYTES`) is kept as `ResultImage` and named in
the text as attached; any other image, audio and binary resources become a
one-line placeholder naming their type and size (the model is told it was not
shown rather than left to guess). A result with no content but
`structuredContent` is that JSON. Whether the server flagged the result
`isError` is the caller's business (it becomes an error result).
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass

from mcp import types

from agent.providers.media import IMAGE_MAX_BYTES, IMAGE_TYPES

__all__ = ["ResultContent", "ResultImage", "result_content", "result_text"]

EMPTY = "(no output)"


@dataclass(frozen=True, slots=True)
class ResultImage:
    mime_type: str
    data: bytes


@dataclass(frozen=True, slots=True)
class ResultContent:
    text: str
    images: tuple[ResultImage, ...] = ()


def _decoded_size(data: str) -> int:
    """Bytes in a base64 payload, without decoding it."""
    data = data.strip()
    return max(0, len(data) * 3 // 4 - data[-2:].count("="))


def _omitted(kind: str, mime: str | None, data: str) -> str:
    return (
        f"[{kind} {mime or 'of unknown type'}, {_decoded_size(data)} bytes: not shown to the model]"
    )


def _image(block: types.ImageContent) -> ResultImage | None:
    """The image to show, or None: a type no vision API takes, too big, not base64."""
    mime = block.mimeType.lower()
    if mime not in IMAGE_TYPES or _decoded_size(block.data) > IMAGE_MAX_BYTES:
        return None
    try:
        data = base64.b64decode(block.data, validate=True)
    except (binascii.Error, ValueError):
        return None
    return ResultImage(mime, data) if data else None


def _block_text(block: types.ContentBlock, images: list[ResultImage] | None) -> str:
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.ImageContent):
        image = _image(block) if images is not None else None
        if images is None or image is None:
            return _omitted("image", block.mimeType, block.data)
        images.append(image)
        return f"[image {image.mime_type}, {len(image.data)} bytes: attached]"
    if isinstance(block, types.AudioContent):
        return _omitted("audio", block.mimeType, block.data)
    if isinstance(block, types.ResourceLink):
        title = f" ({block.title or block.name})" if (block.title or block.name) else ""
        return f"[resource link {block.uri}{title}]"
    resource = block.resource
    if isinstance(resource, types.TextResourceContents):
        return f"[resource {resource.uri}]\n{resource.text}"
    return _omitted(f"resource {resource.uri}", resource.mimeType, resource.blob)


def result_content(result: types.CallToolResult, *, images: bool) -> ResultContent:
    """The result's text, and its images when `images` (the model reads them)."""
    kept: list[ResultImage] | None = [] if images else None
    parts = [_block_text(block, kept) for block in result.content]
    if not parts and result.structuredContent is not None:
        parts.append(json.dumps(result.structuredContent, ensure_ascii=False))
    text = "\n".join(p for p in parts if p)
    return ResultContent(text or EMPTY, tuple(kept or ()))


def result_text(result: types.CallToolResult) -> str:
    """The result as text alone (images as placeholders)."""
    return result_content(result, images=False).text
