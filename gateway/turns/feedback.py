"""What a running turn shows and keeps as it goes (gateway.turns.execution's run
phase): `TurnRecorder`, the agent loop's observer, stores each mid-turn
message and forwards streamed text (joined, a few events a second) and tool
progress; `TypingSignal` sends `working` once a turn has run a moment, and
`idle` after it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from agent.loop import TurnObserver
from agent.messages import ChatMessage, ToolCall
from agent.tools.base import ToolResult
from gateway.bus import ChannelEvent, EventKind
from gateway.turns.opener import OpenedTurn
from gateway.turns.tool_progress import ToolProgress
from gateway.work import ReplySink
from storage.store import Store

__all__ = ["TurnRecorder", "TypingSignal"]

_DELTA_INTERVAL_SECS = 0.05  # streamed pieces closer together than this go out joined


@dataclass(slots=True)
class TurnRecorder(TurnObserver):
    """Stores the messages a turn makes as it goes (before each next model
    call), and passes its streamed text and tool calls on to the chat."""

    store: Store
    sink: ReplySink
    turn: OpenedTurn
    run_id: str
    event: ChannelEvent
    progress: ToolProgress
    deltas: list[str] = field(default_factory=list)  # streamed text not yet passed on
    delta_sent_at: float = field(default_factory=time.monotonic)  # the turn's start at first
    streamed: bool = False  # a delta went out

    async def tool_started(self, call: ToolCall) -> None:
        await self.flush_deltas()  # "let me check…" is shown now, not after the tool
        await self.progress.tool_started(call)

    async def tool_finished(self, result: ToolResult, secs: float) -> None:
        await self.progress.tool_finished(result, secs)

    async def on_messages(self, new: Sequence[ChatMessage]) -> None:
        turn = self.turn
        await self.store.append_turn(turn.session_id, self.run_id, new, turn.deferred)
        turn.deferred = None

    async def on_delta(self, text: str) -> None:
        """Streamed text goes on at most every `_DELTA_INTERVAL_SECS`, pieces
        that came sooner joined: a fast model's tokens cost a few events a
        second, not one each. The first goes once the turn has run that long."""
        self.deltas.append(text)
        if time.monotonic() - self.delta_sent_at >= _DELTA_INTERVAL_SECS:
            await self.flush_deltas()

    async def flush_deltas(self) -> None:
        if not self.deltas:
            return
        text = "".join(self.deltas)
        self.deltas.clear()
        self.delta_sent_at = time.monotonic()
        self.streamed = True
        await self.sink.notify(dataclasses.replace(self.event, kind=EventKind.DELTA, text=text))

    async def finish_deltas(self) -> None:
        """At the reply: the rest of a streamed reply goes on, so the deltas add
        up to it; a reply that came whole within the first interval streams
        nothing (its message carries the text: one frame, not three)."""
        if self.streamed:
            await self.flush_deltas()
        self.deltas.clear()


class TypingSignal:
    """The turn's `working` event once it has run `delay` seconds (at once for
    0; never for None), and `idle` after it, only if `working` went out."""

    def __init__(self, sink: ReplySink, working: ChannelEvent, delay: float | None) -> None:
        self.sink = sink
        self.working = working
        self.delay = delay
        self.shown = False
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        if self.delay is None:
            return
        if self.delay == 0:
            await self._show()
        else:
            self._timer = asyncio.get_running_loop().call_later(self.delay, self._fire)

    def _fire(self) -> None:
        self._task = asyncio.create_task(self._show(), name="typing")  # awaited in stop()

    async def _show(self) -> None:
        await self.sink.notify(self.working)  # best effort, bounded by its own timeout
        self.shown = True

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._task is not None:
            try:
                await self._task
            finally:
                self._task.cancel()  # only if stop() itself was cancelled meanwhile
        if self.shown:
            await self.sink.notify(dataclasses.replace(self.working, kind=EventKind.IDLE))
