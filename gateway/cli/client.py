"""`picobot agent`: the terminal client for the WebSocket channel.

Interactive mode: line editing and history (prompt_toolkit), replies rendered as
Markdown (rich), a spinner with elapsed time while the agent works, and a dim
line per finished tool call when the gateway's welcome says the operator wants
them shown (`show_tool_results`). One-shot
mode (`-m`): print the reply and exit 0, non-zero on error. The client keeps a
stable chat id in a small state file so reconnecting continues the conversation,
and remembers the reply ids it has shown so a reply re-sent after a reconnect
is shown once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import websockets
from rich.console import Console
from rich.live import Live
from rich.markdown import Markdown
from rich.text import Text

__all__ = ["ClientState", "run_client"]

LOCAL_COMMANDS = {
    "/quit": "leave the client",
    "/exit": "leave the client",
    "/clear": "clear the screen",
}
_SEEN_KEEP = 500


class ClientError(Exception):
    pass


@dataclass(slots=True)
class ClientState:
    """Persisted in $PICOBOT_HOME/client.json."""

    path: Path
    chat_id: str = ""
    seen: deque[int] = field(default_factory=lambda: deque(maxlen=_SEEN_KEEP))

    @classmethod
    def load(cls, path: Path) -> ClientState:
        state = cls(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            state.chat_id = str(data.get("chat_id", ""))
            state.seen.extend(int(i) for i in data.get("seen", []))
        except (OSError, ValueError):
            pass
        if not state.chat_id:
            state.chat_id = f"cli-{uuid.uuid4().hex[:12]}"
            state.save()
        return state

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps({"chat_id": self.chat_id, "seen": list(self.seen)}))

    def first_sight(self, reply_id: Any) -> bool:
        if not isinstance(reply_id, int):
            return True
        if reply_id in self.seen:
            return False
        self.seen.append(reply_id)
        return True


class Connection:
    def __init__(
        self, ws: websockets.ClientConnection, state: ClientState, *, show_tools: bool = False
    ) -> None:
        self.ws = ws
        self.state = state
        self.show_tools = show_tools
        self.frames: asyncio.Queue[dict[str, Any]] = asyncio.Queue(256)

    @classmethod
    async def open(cls, url: str, token: str | None, state: ClientState) -> Connection:
        try:
            ws = await websockets.connect(url, max_size=8 * 1024 * 1024)
        except (OSError, websockets.InvalidURI, websockets.InvalidHandshake) as exc:
            raise ClientError(f"cannot connect to {url}: {exc}") from None
        hello: dict[str, Any] = {"type": "hello", "protocol": 1, "chat_id": state.chat_id}
        if token:
            hello["token"] = token
        await ws.send(json.dumps(hello))
        try:
            welcome = json.loads(await asyncio.wait_for(ws.recv(), 10))
        except websockets.ConnectionClosed as exc:
            raise ClientError(
                f"the gateway closed the connection ({exc.rcvd.code if exc.rcvd else '?'}): wrong token?"
            ) from None
        if welcome.get("type") == "error":
            raise ClientError(f"the gateway refused the connection: {welcome.get('message')}")
        return cls(ws, state, show_tools=welcome.get("show_tool_results") is True)

    async def pump(self) -> None:
        try:
            async for raw in self.ws:
                await self.frames.put(json.loads(raw))
        except websockets.ConnectionClosed:
            pass
        await self.frames.put({"type": "closed"})

    async def send(self, text: str) -> str:
        msg_id = uuid.uuid4().hex[:16]
        await self.ws.send(json.dumps({"type": "message", "id": msg_id, "text": text}))
        return msg_id


def keep_line_breaks(text: str) -> str:
    """Chat replies mean their single newlines; Markdown would join the lines.
    Hard breaks (two trailing spaces) everywhere except inside code fences."""
    out: list[str] = []
    fenced = False
    for line in text.split("\n"):
        fence = line.lstrip().startswith("```")
        if fence:
            fenced = not fenced
        out.append(line if fence or fenced or not line.strip() else line + "  ")
    return "\n".join(out)


def tool_line(frame: dict[str, Any]) -> str | None:
    """A finished tool call as one line (`tool` frame, PROTOCOL.md); None while it runs."""
    status = frame.get("status")
    if status not in ("ok", "error"):
        return None
    secs = frame.get("secs")
    took = f" {secs:.1f}s" if isinstance(secs, int | float) else ""
    return f"🔧 {frame.get('name')}({frame.get('summary')}) {status}{took}"


def _print_reply(console: Console, text: str, *, plain: bool) -> None:
    if plain:
        console.print(text, markup=False, highlight=False)
    else:
        console.print(Markdown(keep_line_breaks(text)))


class _Working:
    """Spinner text that shows the elapsed time whenever rich re-renders it."""

    def __init__(self) -> None:
        self.started = time.monotonic()

    def __rich__(self) -> str:
        return f"working… {time.monotonic() - self.started:.1f}s"


async def _await_reply(
    conn: Connection,
    msg_id: str,
    console: Console,
    *,
    plain: bool,
    reply_timeout: float,
    interactive: bool,
) -> tuple[str, bool]:
    """Frames until the reply to `msg_id`; other replies are shown as they come.

    Returns the reply and whether it is already on screen (streamed live)."""
    status = console.status(_Working()) if interactive else None
    live: Live | None = None
    streamed = ""
    if status is not None:
        status.start()
    try:
        async with asyncio.timeout(reply_timeout):
            while True:
                frame = await conn.frames.get()
                kind = frame.get("type")
                if kind == "closed":
                    raise ClientError("the gateway closed the connection")
                if kind == "error" and frame.get("id") in (msg_id, None):
                    raise ClientError(f"{frame.get('code')}: {frame.get('message')}")
                if kind == "tool" and interactive and conn.show_tools:
                    line = tool_line(frame)
                    if line is not None:
                        console.print(Text(line, style="dim"))  # Text: no markup in arguments
                    continue
                if kind == "delta" and interactive:
                    streamed += str(frame.get("text", ""))
                    if live is None:
                        if status is not None:
                            status.stop()
                        live = Live(
                            console=console, refresh_per_second=10, vertical_overflow="visible"
                        )
                        live.start()
                    live.update(Markdown(keep_line_breaks(streamed)))
                    continue
                if kind != "message" or not conn.state.first_sight(frame.get("id")):
                    continue
                conn.state.save()
                text = str(frame.get("text", ""))
                if frame.get("reply_to") == msg_id:
                    if live is None:
                        return text, False
                    live.update(Markdown(keep_line_breaks(text)))  # the final, persisted text
                    return text, True
                if status is not None:
                    status.stop()
                _print_reply(console, text, plain=plain)
                if status is not None and live is None:
                    status.start()
    except TimeoutError:
        raise ClientError(f"no reply within {reply_timeout:g}s") from None
    finally:
        if live is not None:
            live.stop()
        if status is not None:
            status.stop()


async def _one_shot(conn: Connection, text: str, reply_timeout: float, out: TextIO) -> int:
    msg_id = await conn.send(text)
    reply, _ = await _await_reply(
        conn,
        msg_id,
        Console(file=sys.stderr),
        plain=True,
        reply_timeout=reply_timeout,
        interactive=False,
    )
    out.write(reply + "\n")
    out.flush()
    return 0


async def _interactive(conn: Connection, reply_timeout: float, history_path: Path) -> int:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory

    console = Console()
    session: PromptSession[str] = PromptSession(history=FileHistory(str(history_path)))
    console.print(
        f"[bold]picobot[/bold] — chat [cyan]{conn.state.chat_id}[/cyan]. /help for commands, /quit to leave."
    )
    while True:
        try:
            line = (await session.prompt_async("› ")).strip()
        except (EOFError, KeyboardInterrupt):
            return 0
        if not line:
            continue
        if line in ("/quit", "/exit"):
            return 0
        if line == "/clear":
            console.clear()
            continue
        if line == "/help":
            for name, what in LOCAL_COMMANDS.items():
                console.print(f"{name} — {what}")
        msg_id = await conn.send(line)
        try:
            reply, shown = await _await_reply(
                conn, msg_id, console, plain=False, reply_timeout=reply_timeout, interactive=True
            )
        except ClientError as exc:
            console.print(f"[red]{exc}[/red]")
            if "closed" in str(exc):
                return 1
            continue
        if not shown:
            _print_reply(console, reply, plain=False)


async def run_client(
    url: str,
    token: str | None,
    state: ClientState,
    *,
    message: str | None,
    reply_timeout: float,
    history_path: Path,
    out: TextIO = sys.stdout,
) -> int:
    try:
        conn = await Connection.open(url, token, state)
    except ClientError as exc:
        print(f"picobot agent: {exc}", file=sys.stderr)
        return 2
    pump = asyncio.create_task(conn.pump(), name="client-pump")
    try:
        if message is not None:
            return await _one_shot(conn, message, reply_timeout, out)
        return await _interactive(conn, reply_timeout, history_path)
    except ClientError as exc:
        print(f"picobot agent: {exc}", file=sys.stderr)
        return 1
    finally:
        await conn.ws.close()
        pump.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await pump
