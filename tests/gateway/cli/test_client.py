"""The terminal client: Markdown line breaks, links, reply-id memory, tool-call lines."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from prompt_toolkit.formatted_text import ANSI, fragment_list_to_text, to_formatted_text

from gateway.cli.client.link import Link
from gateway.cli.client.main import ClientState
from gateway.cli.client.render import (
    hyperlinks_supported,
    keep_line_breaks,
    render_markdown,
    tool_line,
)
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
    frame = {"type": "tool", "name": "read", "summary": "path=a.md", "status": "ok", "secs": 0.25}
    assert tool_line(frame) == "🔧 read(path=a.md) ok 0.2s"
    assert tool_line({**frame, "status": "running", "secs": None}) is None


async def test_tool_frames_come_whatever_the_operator_says_and_render_as_one_line(
    home: Path, llm: FakeOpenAI
) -> None:
    """The `tool` frames always come (the terminal shows them unless told not
    to: tests/e2e/test_cli_terminal.py); a finished call renders as one line."""
    for show in (True, False):
        llm.add_tool_call("calculator", {"expression": "6*7"})
        llm.add_text("42")
        loaded = make_config(home, llm.base_url, gateway={"show_tool_results": show})
        async with running_gateway(loaded) as gw:
            link = Link(f"ws://127.0.0.1:{gw.port}/ws", None, f"chat-{show}")
            await link.open()
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


LINKED = "see [the docs](https://example.com/d) or <https://a.example/b>"


def test_a_link_for_a_terminal_that_takes_hyperlinks_is_a_zero_width_osc_8_escape() -> None:
    """rich writes OSC 8; prompt_toolkit's ANSI parser dropped its ESC ] and
    printed `8;id=…;https://…`. Wrapped in \\001…\\002 it is written raw."""
    rendered = render_markdown(LINKED, 80, hyperlinks=True)
    fragments = to_formatted_text(ANSI(rendered))
    raw = [text for style, text in fragments if "[ZeroWidthEscape]" in style]
    assert any(r.startswith("\x1b]8;") and r.endswith(";https://example.com/d\x1b\\") for r in raw)
    assert raw.count("\x1b]8;;\x1b\\") == 2  # each link closed
    shown = fragment_list_to_text(fragments)
    assert shown.split("\n")[0].rstrip() == "see the docs or https://a.example/b"
    assert "8;" not in shown


def test_a_link_elsewhere_is_text_and_url_and_an_autolink_is_not_doubled() -> None:
    for color in (True, False):
        rendered = render_markdown(LINKED, 80, color=color, hyperlinks=False)
        shown = fragment_list_to_text(to_formatted_text(ANSI(rendered)))
        assert shown.rstrip() == "see the docs (https://example.com/d) or https://a.example/b"
        assert "\x1b]" not in rendered


def test_no_color_keeps_the_hyperlink() -> None:
    """NO_COLOR drops colours, not links (rich without a colour system drops both)."""
    rendered = render_markdown(LINKED, 80, color=False, hyperlinks=True)
    assert "https://example.com/d" in rendered
    assert "\x1b[3" not in rendered  # no foreground colour


def test_hyperlinks_go_to_terminals_that_take_them() -> None:
    assert hyperlinks_supported({"TERM": "xterm-256color"}, isatty=True)
    assert hyperlinks_supported({"TERM": "screen", "TMUX": "/tmp/x"}, isatty=True)
    assert not hyperlinks_supported({"TERM": "xterm-256color"}, isatty=False)  # a pipe
    for term in ("dumb", "linux", "screen.xterm-256color", ""):
        assert not hyperlinks_supported({"TERM": term}, isatty=True), term
    assert not hyperlinks_supported({"TERM": "xterm", "PICOBOT_HYPERLINKS": "0"}, isatty=True)
    assert hyperlinks_supported({"TERM": "dumb", "PICOBOT_HYPERLINKS": "1"}, isatty=False)
