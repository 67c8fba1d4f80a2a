"""The terminal client: Markdown line breaks, reply-id memory, tool-call lines."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

from rich.console import Console

from gateway.cli.client import ClientState, Connection, _await_reply, keep_line_breaks
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
    from gateway.cli.client import tool_line

    frame = {"type": "tool", "name": "read", "summary": "path=a.md", "status": "ok", "secs": 0.25}
    assert tool_line(frame) == "🔧 read(path=a.md) ok 0.2s"
    assert tool_line({**frame, "status": "running", "secs": None}) is None


async def test_the_client_prints_tool_calls_when_the_gateway_says_so(
    tmp_path: Path, home: Path, llm: FakeOpenAI
) -> None:
    llm.add_tool_call("calculator", {"expression": "6*7"})
    llm.add_text("42")
    for show in (True, False):
        loaded = make_config(home, llm.base_url, gateway={"show_tool_results": show})
        async with running_gateway(loaded) as gw:
            state = ClientState.load(tmp_path / f"client-{show}.json")
            conn = await Connection.open(f"ws://127.0.0.1:{gw.port}/ws", None, state)
            assert conn.show_tools is show
            pump = asyncio.create_task(conn.pump(), name="test-pump")
            out = io.StringIO()
            try:
                msg_id = await conn.send("what is 6*7?")
                reply, _ = await _await_reply(
                    conn, msg_id, Console(file=out, width=200), plain=True,
                    reply_timeout=10, interactive=True,
                )  # fmt: skip
            finally:
                await conn.ws.close()
                await pump
        printed = out.getvalue()
        assert ("🔧 calculator(expression=6*7) ok" in printed) is show
        assert reply == ("42" if show else "echo: what is 6*7?")
