"""The interactive terminal client (`picobot agent`) in a real pseudo-terminal
(pexpect), against the gateway and the fake LLM: typing while the agent works,
/stop and Ctrl-C, replies written while it was away, links, /clear, tool-call
lines, and `-m`'s status line on a terminal. Each session's screen output is
kept in test-artifacts/cli/ for a look."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TextIO

import pexpect
import pytest

from agent.messages import CANCELLED_RESULT
from gateway.app import Gateway
from tests.fakes.openai_server import FakeOpenAI
from tests.support import (
    PICOBOT,
    child_env,
    conversation,
    make_config,
    replies_written,
    running_gateway,
    wait_until,
)

pytestmark = pytest.mark.slow

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "cli"


class Terminal:
    """One `picobot agent` in a 40×160 pseudo-terminal."""

    def __init__(self, child: pexpect.spawn, log: TextIO, path: Path) -> None:
        self.child = child
        self.log = log
        self.path = path

    async def expect(self, text: str, timeout: float = 20) -> None:
        await self.child.expect_exact(text, timeout=timeout, async_=True)

    def type(self, line: str) -> None:
        self.child.sendline(line)

    def ctrl_c(self) -> None:
        self.child.sendcontrol("c")

    def screen(self) -> str:
        self.log.flush()
        return self.path.read_text(encoding="utf-8")

    async def exits(self) -> int:
        await self.child.expect(pexpect.EOF, timeout=20, async_=True)
        self.child.close()
        assert self.child.exitstatus is not None
        return int(self.child.exitstatus)


@asynccontextmanager
async def terminal(
    gw: Gateway,
    home: Path,
    name: str,
    *args: str,
    ready: str = "/help for commands",
    **env_extra: str,
) -> AsyncIterator[Terminal]:
    """`picobot agent ARGS` in a pseudo-terminal; back once `ready` is shown."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.log"
    # pexpect answers no cursor-position request: say so rather than make it wait
    env = child_env(home, TERM="xterm", NO_COLOR="1", PROMPT_TOOLKIT_NO_CPR="1", **env_extra)
    with path.open("w", encoding="utf-8") as log:
        child = pexpect.spawn(
            PICOBOT,
            ["agent", "--gateway-url", f"ws://127.0.0.1:{gw.port}/ws", *args],
            env=env,
            dimensions=(40, 160),
            encoding="utf-8",
            codec_errors="replace",
        )
        child.logfile_read = log
        term = Terminal(child, log, path)
        try:
            await term.expect(ready)
            yield term
        finally:
            if child.isalive():
                child.terminate(force=True)


async def slow_turn(term: Terminal, llm: FakeOpenAI) -> None:
    """Ask for the scripted `sleep 30` tool call; back once the turn runs."""
    term.type("run the slow thing")
    await llm.wait_requests(1, timeout=20)  # the turn has started (its working frame went first)


async def test_a_second_message_and_stop_typed_during_a_long_tool_call_go_out_at_once(
    home: Path, llm: FakeOpenAI
) -> None:
    llm.add_tool_call("bash", {"command": "sleep 30"})
    async with (
        running_gateway(make_config(home, llm.base_url)) as gw,
        terminal(gw, home, "second-message-and-stop") as term,
    ):
        await slow_turn(term, llm)
        term.type("and then say hi")
        # acknowledged (durably recorded) while the tool still runs
        await term.expect("queued: answered after the running task")
        assert len(llm.requests) == 1
        term.type("/stop")
        await term.expect("Stopped.")
        await term.expect("echo: and then say hi")
        term.type("/quit")
        assert await term.exits() == 0
    stopped = conversation(llm.requests[-1])
    assert [m["role"] for m in stopped] == ["user", "assistant", "tool", "user"]
    assert stopped[2]["content"] == CANCELLED_RESULT
    assert stopped[3]["content"] == "and then say hi"


async def tool_call_running(gw: Gateway) -> None:
    """Until the turn's tool call is stored: its batch runs from then on."""
    assert gw.store is not None
    store = gw.store

    async def stored() -> bool:
        count = await store.db.read(
            lambda c: c.execute(
                "SELECT COUNT(*) FROM messages WHERE tool_calls IS NOT NULL"
            ).fetchone()[0]
        )
        return bool(count)

    await wait_until(stored)


async def test_ctrl_c_once_stops_the_turn_twice_quits(home: Path, llm: FakeOpenAI) -> None:
    llm.add_tool_call("bash", {"command": "sleep 30"})
    async with (
        running_gateway(make_config(home, llm.base_url)) as gw,
        terminal(gw, home, "ctrl-c") as term,
    ):
        await slow_turn(term, llm)
        await tool_call_running(gw)  # stopped in the call, not while it is being stored
        term.ctrl_c()
        await term.expect("stopping the running task")
        await term.expect("Stopped.")
        assert term.child.isalive()
        term.type("still there?")
        await term.expect("echo: still there?")
        term.ctrl_c()
        await term.expect("(Ctrl-C again to quit)")
        term.ctrl_c()
        assert await term.exits() == 0
    assert conversation(llm.requests[-1])[2]["content"] == CANCELLED_RESULT


async def test_a_reply_written_while_away_is_shown_on_reconnect_once(
    home: Path, llm: FakeOpenAI
) -> None:
    llm.hold()
    async with (
        running_gateway(make_config(home, llm.base_url)) as gw,
        terminal(gw, home, "away-1") as term,
    ):
        term.type("answer me later")
        await llm.wait_requests(1, timeout=20)
        term.type("/quit")  # the turn goes on without the client
        assert await term.exits() == 0
        llm.release()
        await replies_written(gw)
        async with terminal(gw, home, "away-2") as term:
            await term.expect("earlier, while you were away")
            await term.expect("echo: answer me later")
            term.type("and now?")
            await term.expect("echo: and now?")
            assert term.screen().count("echo: answer me later") == 1
            term.type("/quit")
            assert await term.exits() == 0
        async with terminal(gw, home, "away-3") as term:
            term.type("once more")
            await term.expect("echo: once more")
            assert "answer me later" not in term.screen()
            term.type("/quit")
            assert await term.exits() == 0


async def test_the_client_reconnects_when_the_gateway_comes_back(
    home: Path, llm: FakeOpenAI
) -> None:
    loaded = make_config(home, llm.base_url)
    async with running_gateway(loaded) as gw:
        port = gw.port
        term_cm = terminal(gw, home, "reconnect")
        term = await term_cm.__aenter__()
    try:
        await term.expect("disconnected from the gateway")
        again = make_config(home, llm.base_url, gateway={"port": port})
        async with running_gateway(again):
            await term.expect("reconnected.")
            term.type("after the restart")
            await term.expect("echo: after the restart")
            term.type("/quit")
            assert await term.exits() == 0
    finally:
        await term_cm.__aexit__(None, None, None)


async def test_an_unknown_command_is_refused_locally(home: Path, llm: FakeOpenAI) -> None:
    async with (
        running_gateway(make_config(home, llm.base_url)) as gw,
        terminal(gw, home, "unknown-command") as term,
    ):
        term.type("/frobnicate now")
        await term.expect("Unknown command /frobnicate. /help lists the commands.")
        term.type("/etc/hosts is a file, right?")  # a path, not a command
        await term.expect("echo: /etc/hosts is a file, right?")
        term.type("/sessions")
        await term.expect("Sessions in this chat:")
        term.type("/quit")
        assert await term.exits() == 0
    assert [conversation(r)[-1]["content"] for r in llm.requests] == [
        "/etc/hosts is a file, right?"
    ]


LINKED = "Read [the docs](https://example.com/d) first."


async def test_a_link_is_a_real_hyperlink_in_a_terminal_and_text_with_url_otherwise(
    home: Path, llm: FakeOpenAI
) -> None:
    """It printed as `8;id=…;https://…`: rich's OSC 8 without its ESC ]."""
    async with running_gateway(make_config(home, llm.base_url)) as gw:
        llm.add_text(LINKED)
        async with terminal(gw, home, "links-osc8") as term:
            term.type("where are the docs?")
            await term.expect("\x1b]8;;\x1b\\")  # a link's end: the reply is rendered
            await term.expect("first.")
            screen = term.screen()
            assert ";https://example.com/d\x1b\\" in screen  # ESC ] 8 ; id ; url ST
            assert screen.count("8;id=") == screen.count("\x1b]8;id=")  # no bare `8;id=…`
            term.type("/quit")
            assert await term.exits() == 0
        llm.add_text(LINKED)
        async with terminal(gw, home, "links-plain", PICOBOT_HYPERLINKS="0") as term:
            term.type("and without hyperlinks?")
            await term.expect("the docs (")  # rendered (the streamed text has `[the docs](`)
            await term.expect(" first.")
            shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", term.screen())  # colours, cursor
            assert "Read the docs (https://example.com/d) first." in shown
            assert "8;" not in shown.split("and without hyperlinks?")[-1]
            term.type("/quit")
            assert await term.exits() == 0


async def test_clear_erases_the_screen(home: Path, llm: FakeOpenAI) -> None:
    async with (
        running_gateway(make_config(home, llm.base_url)) as gw,
        terminal(gw, home, "clear") as term,
    ):
        assert CLEAR not in term.screen()
        term.type("/clear")
        await term.expect(CLEAR)
        term.type("still here?")
        await term.expect("echo: still here?")
        term.type("/quit")
        assert await term.exits() == 0
    assert [conversation(r)[-1]["content"] for r in llm.requests] == ["still here?"]


CLEAR = "\x1b[H\x1b[2J\x1b[3J"
TOOL_LINE = "🔧 calculator(expression=6*7) ok"


async def test_tool_calls_are_shown_unless_hidden_and_tools_toggles(
    home: Path, llm: FakeOpenAI
) -> None:
    """Shown by default, whatever the operator's show_tool_results (false
    here, the default); --hide-tools hides them, /tools shows them again."""
    for _ in range(3):
        llm.add_tool_call("calculator", {"expression": "6*7"})
        llm.add_text("It is 42.")
    async with running_gateway(make_config(home, llm.base_url)) as gw:
        async with terminal(gw, home, "tools-shown") as term:
            term.type("what is 6*7?")
            await term.expect(TOOL_LINE)
            await term.expect("It is 42.")
            term.type("/quit")
            assert await term.exits() == 0
        async with terminal(gw, home, "tools-hidden", "--hide-tools") as term:
            term.type("and again?")
            await term.expect("It is 42.")
            assert TOOL_LINE not in term.screen()
            term.type("/tools")
            await term.expect("tool calls are shown now")
            term.type("once more?")
            await term.expect(TOOL_LINE)
            await term.expect("It is 42.")
            term.type("/quit")
            assert await term.exits() == 0


async def test_one_shot_on_a_terminal_shows_the_wait_then_only_the_answer(
    home: Path, llm: FakeOpenAI
) -> None:
    """stderr a terminal: a status line counts the seconds while the turn
    runs (a provider being retried sends no frame: it shows as working)."""
    llm.hold()
    async with running_gateway(make_config(home, llm.base_url)) as gw:
        try:
            async with terminal(gw, home, "one-shot", "-m", "take your time", ready="… ") as term:
                await term.expect("working")
                await llm.wait_requests(1, timeout=20)
                llm.release()
                await term.expect("echo: take your time")
                # (the log reads back \r as \n) the status line counted, then was erased
                waited = term.screen().split("echo: take your time")[0]
                assert "\x1b[K… working" in waited
                assert waited.endswith("\x1b[K")
                assert await term.exits() == 0
        finally:
            llm.release()
