"""`picobot agent`: the terminal client for the WebSocket channel.

Interactive mode (gateway.cli.client.tui): line editing and history, input
live while the agent works, replies rendered as Markdown, reconnecting by
itself. One-shot mode (`-m`): print the reply and exit 0, non-zero on error.
The client keeps a stable chat id in a small state file so reconnecting
continues the conversation, and remembers the reply ids it has shown so a
reply re-sent after a reconnect is shown once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from pathlib import Path
from typing import TextIO

from gateway.cli.client.link import ClientError, Link
from gateway.cli.client.state import ClientState
from gateway.cli.client.tui import LOCAL_COMMANDS, Interactive, keep_line_breaks, tool_line

__all__ = ["LOCAL_COMMANDS", "ClientState", "keep_line_breaks", "run_client", "tool_line"]


async def _one_shot(
    link: Link, state: ClientState, text: str, reply_timeout: float, out: TextIO
) -> int:
    """Send `text`, print the reply to it (only), exit."""
    msg_id = await link.send(text)
    try:
        async with asyncio.timeout(reply_timeout):
            while True:
                frame = await link.frames.get()
                kind = frame.get("type")
                if kind in ("disconnected", "refused"):
                    raise ClientError("the gateway closed the connection")
                if kind == "error" and frame.get("id") in (msg_id, None):
                    raise ClientError(f"{frame.get('code')}: {frame.get('message')}")
                if kind == "message" and frame.get("reply_to") == msg_id:
                    if state.first_sight(frame.get("id")):
                        state.save()
                    out.write(str(frame.get("text", "")) + "\n")
                    out.flush()
                    return 0
    except TimeoutError:
        raise ClientError(f"no reply within {reply_timeout:g}s") from None


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
    link = Link(url, token, state.chat_id)
    try:
        await link.open()
    except ClientError as exc:
        print(f"picobot agent: {exc}", file=sys.stderr)
        return 2
    reader = asyncio.create_task(link.run(), name="client-link")
    try:
        if message is not None:
            return await _one_shot(link, state, message, reply_timeout, out)
        color = "NO_COLOR" not in os.environ
        return await Interactive(link, state, history_path, color=color).run()
    except ClientError as exc:
        print(f"picobot agent: {exc}", file=sys.stderr)
        return 1
    finally:
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader
        await link.close()
