"""`picobot agent` interactive: input stays live while the agent works.

The prompt (prompt_toolkit) never waits for a reply: a line is sent at once,
so a second message is queued by the gateway like in any channel and `/stop`
stops the running turn. Frames are shown above the prompt as they arrive:
replies rendered as Markdown (rich), the streamed text of the running turn in
the prompt's top lines, the working state with elapsed time in the toolbar.

Ctrl-C once stops the running turn (sends `/stop`); twice in a row quits.
Replies the gateway wrote while this client was away are shown when it
(re)connects, marked as earlier, each once (`ClientState` remembers the ids).
An unknown `/command` is refused here instead of going to the model; the
gateway's command names come with its welcome frame. Each finished tool call
is one line (`--hide-tools` or `/tools` hides them); `/clear` erases the screen.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prompt_toolkit import PromptSession
from prompt_toolkit.formatted_text import ANSI, FormattedText
from prompt_toolkit.history import FileHistory
from prompt_toolkit.patch_stdout import patch_stdout
from prompt_toolkit.shortcuts import print_formatted_text

from gateway.cli.client.link import COMMAND, ClientError, Link
from gateway.cli.client.render import render_markdown, tool_line
from gateway.cli.client.state import ClientState

__all__ = ["LOCAL_COMMANDS", "Interactive", "is_unknown_command"]

LOCAL_COMMANDS = {
    "/quit": "leave the client (a running task goes on; its reply is shown next time)",
    "/exit": "leave the client",
    "/clear": "clear the screen",
    "/tools": "show or hide the agent's tool calls (shown unless --hide-tools)",
}
_STREAM_LINES = 4
# erase the screen and the scrollback, cursor to the top left (as clear(1) does)
_CLEAR_SCREEN = "\x1b[H\x1b[2J\x1b[3J"


def is_unknown_command(line: str, known: frozenset[str] | None) -> str | None:
    """The command name when `line` is a /command neither the client nor the
    gateway knows; None otherwise (plain text, `/etc/hosts?`, or unknown list)."""
    match = COMMAND.match(line)
    if match is None or known is None:
        return None
    name = match.group(1).lower()
    if f"/{name}" in LOCAL_COMMANDS or name in known or name == "help":
        return None
    return name


@dataclass(slots=True)
class _Turn:
    """What the client knows about the chat's running work."""

    working_since: float | None = None
    tool: str | None = None  # the tool call running now, from `tool` frames
    stream: str = ""
    unanswered: list[str] = field(default_factory=list)  # ids sent, in order

    @property
    def busy(self) -> bool:
        return self.working_since is not None or bool(self.unanswered)

    def answered(self, reply_to: Any) -> None:
        """A reply to `reply_to` answers it and everything sent before it
        (follow-ups merged into one turn get one reply, to the last)."""
        if reply_to in self.unanswered:
            del self.unanswered[: self.unanswered.index(reply_to) + 1]


class Interactive:
    def __init__(
        self,
        link: Link,
        state: ClientState,
        history_path: Path,
        *,
        color: bool = True,
        hyperlinks: bool = False,
        show_tools: bool = True,
    ) -> None:
        self.link = link
        self.state = state
        self.history_path = history_path
        self.color = color
        self.hyperlinks = hyperlinks  # real OSC 8 links, else `text (url)` (render.py)
        self.show_tools = show_tools  # one line per finished tool call; /tools toggles
        self.turn = _Turn()
        self.armed_quit = False  # a Ctrl-C was pressed; another one quits
        self._interrupted = False  # SIGINT between two prompts (the terminal not raw)

    # -- output ---------------------------------------------------------------
    def _width(self) -> int:
        return max(40, shutil.get_terminal_size((100, 24)).columns - 1)

    def say(self, text: str, style: str = "") -> None:
        print_formatted_text(FormattedText([(style, text)]))

    def show_reply(self, text: str) -> None:
        width = self._width()
        rendered = render_markdown(text, width, color=self.color, hyperlinks=self.hyperlinks)
        print_formatted_text(ANSI(rendered))

    def clear_screen(self) -> None:
        """Erase the screen (the ANSI parser would drop a CSI `J`: written raw)."""
        print_formatted_text(FormattedText([("[ZeroWidthEscape]", _CLEAR_SCREEN)]), end="")

    def _prompt(self) -> FormattedText:
        parts: list[tuple[str, str]] = []
        if self.turn.stream:
            tail = self.turn.stream.rstrip("\n").split("\n")[-_STREAM_LINES:]
            width = self._width()
            for line in tail:
                parts.append(("fg:ansibrightblack", line[:width] + "\n"))
        parts.append(("bold", "› "))
        return FormattedText(parts)

    def _toolbar(self) -> FormattedText:
        if not self.link.online:
            return FormattedText([("", " offline — reconnecting… (messages wait and go out then)")])
        if self.turn.working_since is not None:
            secs = time.monotonic() - self.turn.working_since
            doing = f" ({self.turn.tool})" if self.turn.tool else ""
            return FormattedText([("", f" working{doing}… {secs:.0f}s — Ctrl-C or /stop stops it")])
        return FormattedText([("", f" chat {self.state.chat_id} — /help for commands")])

    # -- the two loops ----------------------------------------------------------
    async def run(self) -> int:
        session: PromptSession[str] = PromptSession(
            history=FileHistory(str(self.history_path)),
            bottom_toolbar=self._toolbar,
            refresh_interval=0.5,
        )
        with patch_stdout(raw=True):
            self.say(
                f"picobot — chat {self.state.chat_id} at {self.link.shown_url}. /help for commands, "
                "Ctrl-C stops a running task, twice quits.",
                "bold",
            )
            loop = asyncio.get_running_loop()
            loop.add_signal_handler(signal.SIGINT, self._on_sigint, session)
            try:
                async with asyncio.TaskGroup() as tg:
                    reader = tg.create_task(self._show_frames(session), name="client-frames")
                    try:
                        return await self._read_input(session)
                    finally:
                        reader.cancel()
            finally:
                loop.remove_signal_handler(signal.SIGINT)

    def _on_sigint(self, session: PromptSession[str]) -> None:
        """While a prompt runs, Ctrl-C is a key (the terminal is raw); between
        two prompts it is a signal: handled alike, never a crash."""
        if session.app.is_running:
            with contextlib.suppress(Exception):  # already exiting
                session.app.exit(exception=KeyboardInterrupt())
        else:
            self._interrupted = True

    async def _ctrl_c(self) -> bool:
        """Once: stop the running turn; twice in a row: True, quit."""
        if self.armed_quit:
            return True
        self.armed_quit = True
        if self.turn.busy:
            await self.link.send("/stop")
            self.say("stopping the running task… (Ctrl-C again to quit)", "fg:ansiyellow")
        else:
            self.say("(Ctrl-C again to quit)", "fg:ansibrightblack")
        return False

    async def _read_input(self, session: PromptSession[str]) -> int:
        while True:
            try:
                if self._interrupted:
                    self._interrupted = False
                    raise KeyboardInterrupt
                line = (await session.prompt_async(self._prompt, handle_sigint=False)).strip()
            except KeyboardInterrupt:
                if await self._ctrl_c():
                    return 0
                continue
            except EOFError:
                return 0
            self.armed_quit = False
            if not line:
                continue
            if line in ("/quit", "/exit"):
                return 0
            if line == "/clear":
                self.clear_screen()
                continue
            if line == "/tools":
                self.show_tools = not self.show_tools
                shown = "shown" if self.show_tools else "hidden"
                self.say(
                    f"tool calls are {shown} now (/tools again to change)", "fg:ansibrightblack"
                )
                continue
            if line.split(maxsplit=1)[0].lower() == "/help":
                for name, what in LOCAL_COMMANDS.items():
                    self.say(f"{name} — {what}")
            unknown = is_unknown_command(line, self.link.commands)
            if unknown is not None:
                self.say(f"Unknown command /{unknown}. /help lists the commands.", "fg:ansired")
                continue
            try:
                msg_id = await self.link.send(line)
            except ClientError as exc:
                self.say(str(exc), "fg:ansired")
                continue
            if COMMAND.match(line) is None:  # commands are answered at once, or not at all
                self.turn.unanswered.append(msg_id)
            if not self.link.online:
                self.say("(not connected: sent when the gateway is back)", "fg:ansibrightblack")

    async def _show_frames(self, session: PromptSession[str]) -> None:
        while True:
            frame = await self.link.frames.get()
            with contextlib.suppress(Exception):  # a bad frame never kills the client
                self._on_frame(frame)
            if session.app.is_running:
                session.app.invalidate()

    def _on_frame(self, frame: dict[str, Any]) -> None:
        kind = frame.get("type")
        turn = self.turn
        if kind == "ack":
            mine = frame.get("id") in turn.unanswered  # a message, not a command
            if mine and turn.working_since is not None and frame.get("status") == "accepted":
                self.say("  ↳ queued: answered after the running task", "fg:ansibrightblack")
        elif kind == "working":
            turn.working_since = time.monotonic()
        elif kind == "idle":
            turn.working_since = None
            turn.tool = None
        elif kind == "tool":
            line = tool_line(frame)
            turn.tool = None if line is not None else str(frame.get("name"))
            if line is not None and self.show_tools:
                self.say(line, "fg:ansibrightblack")
        elif kind == "delta":
            turn.stream += str(frame.get("text", ""))
        elif kind == "message":
            self._on_reply(frame)
        elif kind == "error":
            self.say(f"error: {frame.get('code')}: {frame.get('message')}", "fg:ansired")
        elif kind == "disconnected":
            turn.working_since = None
            self.say("disconnected from the gateway — reconnecting…", "fg:ansiyellow")
        elif kind == "reconnected":
            self.say("reconnected.", "fg:ansigreen")
        elif kind == "refused":
            self.say(f"{frame.get('message')} — restart the client", "fg:ansired")

    def _on_reply(self, frame: dict[str, Any]) -> None:
        self.turn.answered(frame.get("reply_to"))
        self.turn.stream = ""
        if not self.state.first_sight(frame.get("id")):
            return  # shown before (a resend after a reconnect)
        self.state.save()
        if frame.get("earlier"):
            self.say("── earlier, while you were away ──", "fg:ansicyan")
        self.show_reply(str(frame.get("text", "")))
