"""Tool progress in a chat: the text of a turn's tool calls, and one message
per turn that is edited in place as they start and end.

The gateway sends a TOOL `ChannelEvent` carrying every call of the turn so
far (`tool_calls`). `progress_text` renders them one line each; `LiveProgress`
shows that text in one message per chat and turn: posted at the first event,
then edited at most once per `min_interval` (platform flood limits), always
ending on the latest text. `notify` only records the text and wakes a flusher,
so a slow platform never holds up the tool call that caused the event.
Everything here is best effort: delivery problems are logged, never raised;
every task is owned, named, and cancelled and awaited by `close`.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import structlog

from channels.base import ChannelError, RateLimited
from gateway.bus import ChannelEvent, ToolActivity, ToolStatus

__all__ = ["LiveProgress", "progress_line", "progress_text"]

log = structlog.get_logger("channels.progress")

_MARK = {ToolStatus.RUNNING: "…", ToolStatus.OK: "✓", ToolStatus.ERROR: "✗"}
_KEEP_CHATS = 256  # boards remembered for a turn that may still add calls
_MAX_RATE_LIMITED = 3  # flood-control answers in a row before a board gives up

Post = Callable[[ChannelEvent, str], Awaitable[str]]  # → a handle to edit it by
Edit = Callable[[ChannelEvent, str, str], Awaitable[None]]  # (event, handle, text)


def progress_line(call: ToolActivity) -> str:
    """`🔧 read(path=notes.md) ✓ 0.2s` — never the call's result."""
    secs = f" {call.secs:.1f}s" if call.secs is not None else ""
    status = "" if call.status is ToolStatus.RUNNING else f" {call.status.value}"
    return f"🔧 {call.name}({call.summary}) {_MARK[call.status]}{status}{secs}"


def progress_text(calls: Sequence[ToolActivity]) -> str:
    return "\n".join(progress_line(c) for c in calls)


@dataclass(slots=True)
class _Board:
    """One turn's progress message in one chat."""

    event: ChannelEvent  # the latest, for the platform call
    text: str = ""  # what it should show
    shown: str = ""  # what it shows
    handle: str | None = None
    last_push: float = float("-inf")
    flusher: asyncio.Task[None] | None = None


class LiveProgress:
    def __init__(self, post: Post, edit: Edit, *, min_interval: float = 1.0, name: str) -> None:
        self._post = post
        self._edit = edit
        self._interval = min_interval
        self._name = name
        self._boards: OrderedDict[tuple[str, str], _Board] = OrderedDict()  # (chat, run)
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    def show(self, event: ChannelEvent) -> None:
        """Make the turn's progress message show `event.tool_calls`."""
        if self._closed or not event.tool_calls:
            return
        key = (event.chat_id, event.run_id)
        board = self._boards.get(key)
        if board is None:
            board = self._boards[key] = _Board(event)
            while len(self._boards) > _KEEP_CHATS:
                self._boards.popitem(last=False)  # its flusher, if any, ends on its own
        self._boards.move_to_end(key)
        board.event = event
        board.text = progress_text(event.tool_calls)
        if board.flusher is None or board.flusher.done():
            task = asyncio.create_task(self._flush(board), name=f"{self._name}-{event.chat_id}")
            board.flusher = task
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        self._closed = True
        tasks, self._tasks = list(self._tasks), set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._boards.clear()

    async def _flush(self, board: _Board) -> None:
        loop = asyncio.get_running_loop()
        limited = 0
        while board.shown != board.text:
            wait = board.last_push + self._interval - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            text = board.text
            try:
                if board.handle is None:
                    board.handle = await self._post(board.event, text)
                else:
                    await self._edit(board.event, board.handle, text)
            except RateLimited as exc:
                limited += 1
                if limited < _MAX_RATE_LIMITED:
                    board.last_push = loop.time() + exc.retry_after - self._interval
                    continue
                log.info("tool progress given up: rate limited", chat_id=board.event.chat_id)
                return
            except Exception as exc:  # best effort: never fail the task
                log.info(
                    "tool progress not shown",
                    chat_id=board.event.chat_id,
                    error=str(exc) if isinstance(exc, ChannelError) else type(exc).__name__,
                )
                return
            board.shown = text
            board.last_push = loop.time()
