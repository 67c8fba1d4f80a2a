"""What the model reads of an MCP tool result.

Tool results travel through the agent loop and storage as text, so every
content block becomes text: text as is; an embedded text resource as its URI
and text; images, audio and binary resources as a one-line placeholder naming
their type and size (the model is told it was not shown rather than left to
guess); a resource link as its URI. A result with no content but
`structuredContent` is that JSON. Whether the server flagged the result
`isError` is the caller's business (it becomes an error result).
"""

from __future__ import annotations

import json

from mcp import types

__all__ = ["result_text"]

EMPTY = "(no output)"


def _decoded_size(data: str) -> int:
    """Bytes in a base64 payload, without decoding it."""
    data = data.strip()
    return max(0, len(data) * 3 // 4 - data[-2:].count("="))


def _omitted(kind: str, mime: str | None, data: str) -> str:
    return (
        f"[{kind} {mime or 'of unknown type'}, {_decoded_size(data)} bytes: not shown to the model]"
    )


def _block_text(block: types.ContentBlock) -> str:
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.ImageContent):
        return _omitted("image", block.mimeType, block.data)
    if isinstance(block, types.AudioContent):
        return _omitted("audio", block.mimeType, block.data)
    if isinstance(block, types.ResourceLink):
        title = f" ({block.title or block.name})" if (block.title or block.name) else ""
        return f"[resource link {block.uri}{title}]"
    resource = block.resource
    if isinstance(resource, types.TextResourceContents):
        return f"[resource {resource.uri}]\n{resource.text}"
    return _omitted(f"resource {resource.uri}", resource.mimeType, resource.blob)


def result_text(result: types.CallToolResult) -> str:
    parts = [_block_text(block) for block in result.content]
    if not parts and result.structuredContent is not None:
        parts.append(json.dumps(result.structuredContent, ensure_ascii=False))
    text = "\n".join(p for p in parts if p)
    return text or EMPTY
