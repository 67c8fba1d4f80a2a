from __future__ import annotations

import base64

from mcp import types
from pydantic import AnyUrl

from agent.mcp.content import result_text


def _result(*blocks: types.ContentBlock, structured: dict[str, object] | None = None) -> str:
    return result_text(types.CallToolResult(content=list(blocks), structuredContent=structured))


def test_text_blocks_are_joined() -> None:
    text = _result(
        types.TextContent(type="text", text="one"), types.TextContent(type="text", text="two")
    )
    assert text == "one\ntwo"


def test_an_image_becomes_a_placeholder_with_its_type_and_size() -> None:
    data = base64.b64encode(b"x" * 1000).decode()
    text = _result(types.ImageContent(type="image", data=data, mimeType="image/png"))
    assert text == "[image image/png, 1000 bytes: not shown to the model]"


def test_resources_become_text() -> None:
    uri = AnyUrl("file:///notes/a.txt")
    embedded = types.EmbeddedResource(
        type="resource", resource=types.TextResourceContents(uri=uri, text="hello")
    )
    blob = types.EmbeddedResource(
        type="resource",
        resource=types.BlobResourceContents(
            uri=AnyUrl("file:///a.bin"), blob=base64.b64encode(b"abc").decode(), mimeType="x/y"
        ),
    )
    link = types.ResourceLink(type="resource_link", uri=uri, name="a.txt")
    assert _result(embedded, blob, link).splitlines() == [
        "[resource file:///notes/a.txt]",
        "hello",
        "[resource file:///a.bin x/y, 3 bytes: not shown to the model]",
        "[resource link file:///notes/a.txt (a.txt)]",
    ]


def test_structured_content_alone_is_its_json_and_nothing_at_all_says_so() -> None:
    assert _result(structured={"n": 1}) == '{"n": 1}'
    assert _result() == "(no output)"
