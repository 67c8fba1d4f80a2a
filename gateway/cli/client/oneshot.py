"""`picobot agent -m TEXT`: send one message, print the reply, exit with a
code a script can branch on (`ExitCode`, the table in docs/TERMINAL.md).

How the outcome is told, from the protocol (docs/PROTOCOL.md) rather than
from the wording of the reply:
- an `ack` with status `refused` (the chat's queue is full) → REFUSED;
  `dead_letter` (could not be recorded, never answered) → FAILED;
- an `error` frame naming the message (not recorded: `shutting_down`,
  `internal` …) → FAILED;
- an `approval_request` answering it → APPROVAL (the agent waits for a yes);
- a `message` answering it with no `run_id`: no turn ran. For a /command that
  is its answer; for anything else the access policy refused it → REFUSED;
- a `message` with a `run_id`: the turn ran. Marked `failed: true`, it is
  the notice of a turn that failed (the provider failed, no key) → FAILED;
  else ANSWERED.

The answer goes to stdout, everything else to stderr. With stderr on a
terminal a status line shows the wait (`working 12s`); the protocol has no
frame for the gateway retrying its provider, so that shows as time working.
"""

from __future__ import annotations

import asyncio
import time
from enum import IntEnum
from typing import TextIO

from gateway.cli.client.link import Frame, Link, is_command, stop_task
from gateway.cli.client.state import ClientState

__all__ = ["ExitCode", "OneShotEnd", "ProgressLine", "one_shot"]


class ExitCode(IntEnum):
    ANSWERED = 0
    FAILED = 1  # the turn failed (provider error, no API key) or the gateway answered `error`
    USAGE = 2  # the command line or the config (also argparse's code)
    UNREACHABLE = 3  # cannot connect, the token or chat refused, the connection lost
    REFUSED = 4  # the message was refused: access policy, or the chat's queue is full
    TIMEOUT = 5  # no reply within --timeout
    APPROVAL = 6  # the agent waits for a person to approve a tool call


class OneShotEnd(Exception):
    """The one-shot ends without an answer: its exit code and what to tell."""

    def __init__(self, code: ExitCode, message: str) -> None:
        super().__init__(message)
        self.code = code


class ProgressLine:
    """One status line on a terminal's stderr, redrawn in place: what the
    gateway is doing for the message and for how long."""

    def __init__(self, err: TextIO) -> None:
        self.err = err
        self.since = time.monotonic()
        self.doing = "sending"
        self._shown = False

    def set(self, doing: str) -> None:
        self.doing = doing
        self.draw()

    def draw(self) -> None:
        secs = time.monotonic() - self.since
        self.err.write(f"\r\x1b[K… {self.doing} {secs:.0f}s")
        self.err.flush()
        self._shown = True

    def clear(self) -> None:
        if self._shown:
            self.err.write("\r\x1b[K")
            self.err.flush()
            self._shown = False

    async def run(self) -> None:
        """Redraw every second: the seconds count on while no frame comes
        (a provider being retried sends none)."""
        while True:
            self.draw()
            await asyncio.sleep(1)


async def one_shot(
    link: Link,
    state: ClientState,
    text: str,
    reply_timeout: float,
    out: TextIO,
    err: TextIO,
    *,
    progress: bool = False,
) -> int:
    """Send `text`, print the reply to it (only); the exit code."""
    line = ProgressLine(err) if progress else None
    ticker = asyncio.create_task(line.run(), name="one-shot-progress") if line else None
    answer: str | OneShotEnd
    try:
        answer = await _ask(link, state, text, reply_timeout, line)
    except OneShotEnd as end:
        answer = end
    finally:
        if ticker is not None:
            await stop_task(ticker)
        if line is not None:
            line.clear()
    if isinstance(answer, OneShotEnd):
        err.write(f"{answer}\n")
        err.flush()
        return int(answer.code)
    out.write(answer + "\n")
    out.flush()
    return int(ExitCode.ANSWERED)


async def _ask(
    link: Link, state: ClientState, text: str, reply_timeout: float, line: ProgressLine | None
) -> str:
    msg_id = await link.send(text)
    try:
        async with asyncio.timeout(reply_timeout):
            while True:
                frame = await link.frames.get()
                if line is not None:
                    _show(line, frame, msg_id)
                reply = _judge(frame, msg_id)
                if reply is None:
                    continue
                if state.first_sight(frame.get("id")):
                    await asyncio.to_thread(state.save)
                if frame.get("type") == "approval_request":
                    raise OneShotEnd(ExitCode.APPROVAL, reply)
                if frame.get("run_id") is None:
                    if is_command(text):
                        return reply  # a command's answer
                    raise OneShotEnd(ExitCode.REFUSED, reply)  # no turn ran: refused
                if frame.get("failed") is True:
                    raise OneShotEnd(ExitCode.FAILED, reply)
                return reply
    except TimeoutError:
        raise OneShotEnd(
            ExitCode.TIMEOUT, f"picobot agent: no reply within {reply_timeout:g}s"
        ) from None


def _judge(frame: Frame, msg_id: str) -> str | None:
    """The text of the frame that answers `msg_id`; None for any other frame;
    `OneShotEnd` when the frame ends the wait without an answer."""
    kind = frame.get("type")
    if kind in ("disconnected", "refused"):
        raise OneShotEnd(
            ExitCode.UNREACHABLE, "picobot agent: the connection to the gateway was lost"
        )
    if kind == "error" and frame.get("id") in (msg_id, None):
        raise OneShotEnd(
            ExitCode.FAILED, f"picobot agent: {frame.get('code')}: {frame.get('message')}"
        )
    if kind == "ack" and frame.get("id") == msg_id:
        status = frame.get("status")
        if status == "refused":
            raise OneShotEnd(
                ExitCode.REFUSED,
                "picobot agent: refused: the chat has too many messages waiting; send it later",
            )
        if status == "dead_letter":
            raise OneShotEnd(
                ExitCode.FAILED,
                "picobot agent: the gateway could not record the message (kept aside as a "
                "dead letter for the operator)",
            )
        return None
    if kind in ("message", "approval_request") and frame.get("reply_to") == msg_id:
        return str(frame.get("text", ""))
    return None


def _show(line: ProgressLine, frame: Frame, msg_id: str) -> None:
    kind = frame.get("type")
    if kind == "ack" and frame.get("id") == msg_id:
        line.set("waiting")
    elif kind == "working":
        line.set("working")
    elif kind == "tool":
        running = frame.get("status") == "running"
        line.set(f"working: {frame.get('name')}" if running else "working")
    elif kind == "idle":
        line.set("waiting")
