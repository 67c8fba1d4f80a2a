"""BodyEncoder: the request body is the same JSON, each message converted once."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from agent.messages import ChatMessage, Role, ToolCall
from agent.providers.openai import to_openai_message, to_openai_messages, tool_images_message
from agent.providers.openai_body import BodyEncoder

TOOLS = [{"type": "function", "function": {"name": "read", "description": "", "parameters": {}}}]


class Counting:
    def __init__(self) -> None:
        self.converted: list[str] = []

    async def __call__(self, message: ChatMessage) -> dict[str, Any]:
        self.converted.append(message.content)
        return await to_openai_message(message)


async def test_the_body_is_the_request_as_json() -> None:
    encoder = BodyEncoder(to_openai_message)
    messages = [ChatMessage.system("sys"), ChatMessage.user('hï "quoted"')]
    body = await encoder.body("c", messages, [object()], lambda: TOOLS, {"model": "m"})
    assert json.loads(body) == {
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": 'hï "quoted"'},
        ],
        "tools": TOOLS,
        "model": "m",
    }
    bare = await encoder.body(None, messages, [], lambda: TOOLS, {})
    assert set(json.loads(bare)) == {"messages"}


async def test_a_conversation_converts_only_its_new_messages() -> None:
    convert = Counting()
    encoder = BodyEncoder(convert)
    history = [ChatMessage.user("one"), ChatMessage(Role.ASSISTANT, "two")]
    await encoder.body("chat", history, [], list, {"model": "m"})
    history += [ChatMessage.user("three")]
    body = await encoder.body("chat", history, [], list, {"model": "m"})
    assert convert.converted == ["one", "two", "three"]
    assert [m["content"] for m in json.loads(body)["messages"]] == ["one", "two", "three"]
    # an equal but different object is converted again: identity, not equality
    await encoder.body("chat", [ChatMessage.user("one")], [], list, {"model": "m"})
    assert convert.converted[-1] == "one"
    # another conversation does not share the pieces
    await encoder.body("other", history[:1], [], list, {"model": "m"})
    assert len(convert.converted) == 5


async def test_a_body_cut_back_and_grown_again_is_the_one_encoded_afresh() -> None:
    """The pieces are kept joined: cutting them back to the part a request
    shares with the last one (a tail dropped, the history trimmed to one)
    and appending the rest gives the bytes a fresh encoding does."""
    encoder = BodyEncoder(to_openai_message)
    a, b, c, d, e = (ChatMessage.user(text) for text in ("a", "bb", "ccc", "dddd", "é"))
    for messages in ([a, b, c], [a, b, d, e], [a], [a, c], [b], [], [b, e]):
        body = await encoder.body("chat", messages, [], list, {"model": "m"})
        fresh = await BodyEncoder(to_openai_message).body(None, messages, [], list, {"model": "m"})
        assert body == fresh
        assert [m["content"] for m in json.loads(body)["messages"]] == [m.content for m in messages]


async def test_only_the_warmest_conversations_are_kept() -> None:
    convert = Counting()
    encoder = BodyEncoder(convert, capacity=2)
    messages = {name: [ChatMessage.user(name)] for name in ("a", "b", "c")}
    for name in ("a", "b", "c", "a"):
        await encoder.body(name, messages[name], [], list, {"model": "m"})
    assert convert.converted == ["a", "b", "c", "a"]  # "a" was dropped for "c"


async def test_the_same_tool_list_is_encoded_once() -> None:
    encoder = BodyEncoder(to_openai_message)
    specs = [object()]
    calls: list[int] = []

    def encode() -> list[dict[str, Any]]:
        calls.append(1)
        return TOOLS

    for _ in range(3):
        await encoder.body("c", [ChatMessage.user("x")], specs, encode, {"model": "m"})
    assert len(calls) == 1
    await encoder.body("c", [ChatMessage.user("x")], [object()], encode, {"model": "m"})
    assert len(calls) == 2


async def test_a_request_that_parts_from_the_last_one_midway_is_encoded_as_new() -> None:
    a, b, c, d = (ChatMessage.user(text) for text in "abcd")
    encoder = BodyEncoder(to_openai_message)
    for messages in ([a, b, c], [a, b, d], [a, b, c], [a], [a, b, c, d], [b], [], [c, d]):
        body = await encoder.body("chat", messages, [], list, {"model": "m"})
        fresh = await BodyEncoder(to_openai_message).body("x", messages, [], list, {"model": "m"})
        assert body == fresh


async def test_a_message_is_the_same_bytes_json_writes_and_what_orjson_refuses_still_goes() -> None:
    text = 'hï "q" \\ \n\t\x01 \u2028 😀 </script>'
    encoder = BodyEncoder(to_openai_message)
    body = await encoder.body(None, [ChatMessage.user(text)], [], list, {})
    compact = json.dumps(
        {"messages": [{"role": "user", "content": text}]},
        ensure_ascii=False,
        separators=(",", ":"),
    )
    assert body == compact.encode()

    async def huge(message: ChatMessage) -> dict[str, Any]:
        return {"role": "user", "content": message.content, "n": 2**70}  # beyond orjson

    body = await BodyEncoder(huge).body(None, [ChatMessage.user("x")], [], list, {})
    assert json.loads(body)["messages"] == [{"role": "user", "content": "x", "n": 2**70}]


async def test_a_tool_results_images_follow_the_whole_run_as_it_grows(tmp_path: Path) -> None:
    """Chat completions carry a tool result's images in a user message after the
    last tool message of the run; a run that grows moves them behind the newcomer."""
    image = tmp_path / "a.png"
    image.write_bytes(b"\x89PNG\r\n\x1a\n")
    calls = (ToolCall("c1", "mcp_fs_picture", "{}"), ToolCall("c2", "mcp_fs_echo", "{}"))
    history = [
        ChatMessage.user("look"),
        ChatMessage(Role.ASSISTANT, "", tool_calls=calls),
        ChatMessage.tool_result(calls[0], "[image attached]", (str(image),)),
    ]
    encoder = BodyEncoder(to_openai_message, trailer=tool_images_message)
    first = json.loads(await encoder.body("chat", history, [], list, {}))["messages"]
    assert [m["role"] for m in first] == ["user", "assistant", "tool", "user"]
    history.append(ChatMessage.tool_result(calls[1], "text"))
    grown = await encoder.body("chat", history, [], list, {})
    messages = json.loads(grown)["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "user"]
    assert messages == await to_openai_messages(history)
    url = messages[-1]["content"][1]["image_url"]["url"]
    assert url == "data:image/png;base64," + base64.b64encode(image.read_bytes()).decode()
    fresh = await BodyEncoder(to_openai_message, trailer=tool_images_message).body(
        None, history, [], list, {}
    )
    assert grown == fresh
