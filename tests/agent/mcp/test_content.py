from __future__ import annotations

import base64

from mcp import types
from pydantic import AnyUrl

from agent.mcp.content import ResultImage, result_content, result_text


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


def test_an_image_a_model_reads_is_kept_and_named_as_attached() -> None:
    png = b"\x89PNG\r\n\x1a\n" + b"\0" * 8
    blocks = [
        types.TextContent(type="text", text="here"),
        types.ImageContent(type="image", data=base64.b64encode(png).decode(), mimeType="image/png"),
        types.ImageContent(type="image", data="PHN2Zz4=", mimeType="image/svg+xml"),
        types.ImageContent(type="image", data="not base64!", mimeType="image/jpeg"),
        types.AudioContent(type="audio", data="AAAA", mimeType="audio/wav"),
    ]
    content = result_content(types.CallToolResult(content=blocks), images=True)
    assert content.images == (ResultImage("image/png", png),)
    assert content.text.splitlines() == [
        "here",
        "[image image/png, 16 bytes: attached]",
        "[image image/svg+xml, 5 bytes: not shown to the model]",
        "[image image/jpeg, 8 bytes: not shown to the model]",
        "[audio audio/wav, 3 bytes: not shown to the model]",
    ]
    blind = result_content(types.CallToolResult(content=blocks), images=False)
    assert blind.images == ()
    assert "[image image/png, 16 bytes: not shown to the model]" in blind.text
