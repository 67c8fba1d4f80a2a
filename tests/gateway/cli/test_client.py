"""The terminal client: Markdown line breaks, reply-id memory, tool-call lines."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from gateway.cli.client.link import Link
from gateway.cli.client.main import ClientState, keep_line_breaks, tool_line
from tests.fakes.openai_server import FakeOpenAI
from tests.support import make_config, running_gateway


def test_single_newlines_survive_markdown_but_code_is_untouched() -> None:
    text = "Session 1\nSession 2\n\n```\ncode line\nnext\n```\nafter"
    assert (
        keep_line_breaks(text) == "Session 1  \nSession 2  \n\n```\ncode line\nnext\n```\nafter  "
    )


def test_chat_id_is_stable_and_replies_are_shown_once_across_runs(tmp_path: Path) -> None:
    path = tmp_path / "client.json"
    first = ClientState.load(path)
    assert first.chat_id.startswith("cli-")
    assert first.first_sight(7)
    assert not first.first_sight(7)  # a reply re-sent after a reconnect
    first.save()
    again = ClientState.load(path)
    assert again.chat_id == first.chat_id
    assert not again.first_sight(7)  # remembered on disk
    assert again.first_sight(8)
    assert json.loads(path.read_text())["chat_id"] == first.chat_id


def test_a_corrupt_state_file_starts_fresh(tmp_path: Path) -> None:
    path = tmp_path / "client.json"
    path.write_text("{not json")
    state = ClientState.load(path)
    assert state.chat_id.startswith("cli-")
    assert json.loads(path.read_text())["chat_id"] == state.chat_id


def test_a_finished_tool_frame_is_one_line_and_a_running_one_none() -> None:
    from gateway.cli.client.main import tool_line

    frame = {"type": "tool", "name": "read", "summary": "path=a.md", "status": "ok", "secs": 0.25}
    assert tool_line(frame) == "🔧 read(path=a.md) ok 0.2s"
    assert tool_line({**frame, "status": "running", "secs": None}) is None


async def test_the_client_learns_from_the_welcome_whether_to_print_tool_calls(
    home: Path, llm: FakeOpenAI
) -> None:
    """The `tool` frames always come; the welcome says whether the operator
    wants them shown, and a finished call renders as one line."""
    for show in (True, False):
        llm.add_tool_call("calculator", {"expression": "6*7"})
        llm.add_text("42")
        loaded = make_config(home, llm.base_url, gateway={"show_tool_results": show})
        async with running_gateway(loaded) as gw:
            link = Link(f"ws://127.0.0.1:{gw.port}/ws", None, f"chat-{show}")
            await link.open()
            assert link.show_tools is show
            reader = asyncio.create_task(link.run(), name="test-link")
            lines = []
            try:
                await link.send("what is 6*7?")
                async with asyncio.timeout(10):
                    while (frame := await link.frames.get())["type"] != "message":
                        if frame["type"] == "tool" and (line := tool_line(frame)):
                            lines.append(line)
            finally:
                reader.cancel()
                await link.close()
        assert [line.split(" ok ")[0] for line in lines] == ["🔧 calculator(expression=6*7)"]
        assert frame["text"] == "42"


def test_unknown_commands_are_told_from_text_that_starts_with_a_slash() -> None:
    from gateway.cli.client.tui import is_unknown_command

    known = frozenset({"new", "stop", "status"})
    assert is_unknown_command("/frobnicate now", known) == "frobnicate"
    assert is_unknown_command("/Stop", known) is None
    assert is_unknown_command("/new@picobot title", known) is None
    assert is_unknown_command("/help", known) is None
    assert is_unknown_command("/quit", known) is None  # the client's own
    assert is_unknown_command("/etc/hosts is a file?", known) is None  # a path
    assert is_unknown_command("hello /frobnicate", known) is None
    assert is_unknown_command("/frobnicate", None) is None  # an older gateway: send it
