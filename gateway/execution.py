"""AgentExecutionService: one turn of one conversation, from inbox rows to outbox rows.

Order of writes (each a committed transaction before the next step):
  1. the user message + inbox rows → `started`
  2. each assistant tool-call message, then its tool results (AgentLoop observer)
  3. the final assistant message + the outbox row(s) + inbox rows → `done`
When the turn opened from the cached history (gateway.turns), 1 is stored in
the same transaction as the first of 2 or 3. A crash before that leaves the
inbox rows `received` and recovery runs the turn as new; a crash between 1 and
3 leaves them `started` and recovery re-runs the turn on the persisted history
(dangling tool calls repaired) without a second user message. A crash after 3
only leaves outbox rows to send, which the sender gets straight from the
commit (`ReplySink.handoff`) or, after a restart, from the outbox.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import structlog

from agent.loop import AgentLoop, LoopSettings, TurnObserver
from agent.messages import ChatMessage, Marker
from agent.providers.base import (
    LLMProvider,
    ProviderAuthError,
    ProviderConfigError,
    ProviderError,
    ProviderRateLimited,
    ProviderUnavailable,
)
from agent.tools.base import SchedulerService, ToolContext, ToolRegistry, ToolSettings
from gateway.bus import (
    ChannelEvent,
    EventKind,
    InboundMessage,
    MediaKind,
    OutboundMessage,
    reply_handle,
)
from gateway.config import CompactionConfig
from gateway.turns import OpenedTurn, StaleTurn, TurnOpener
from storage import inbox, messages, outbox
from storage.db import Database

__all__ = ["AgentProfile", "ExecutionService", "ReplySink", "WorkItem", "session_base_id"]

log = structlog.get_logger(__name__)
T = TypeVar("T")

STOPPED_REPLY = "Stopped. The running task was cancelled; send a new message to continue."
GENERIC_FAILURE = "Sorry, something went wrong while answering. The gateway log has the details."
_DELTA_INTERVAL_SECS = 0.05  # streamed pieces closer together than this go out joined


def session_base_id(channel: str, chat_id: str) -> str:
    """DESIGN §5: the terminal channel's session id is the chat id itself."""
    return chat_id if channel == "websocket" else f"{channel}:{chat_id}"


@dataclass(frozen=True, slots=True)
class WorkItem:
    inbox_id: int
    message: InboundMessage
    resume: bool = False  # the user message is already in the transcript
    session_id: str | None = None  # known when resuming


@dataclass(frozen=True, slots=True)
class AgentProfile:
    """Everything a turn on one channel needs from its configured agent."""

    name: str
    provider: LLMProvider
    loop: LoopSettings
    tools: ToolRegistry
    supports_vision: bool = True
    context_window_tokens: int = 128_000
    compaction: CompactionConfig = field(default_factory=CompactionConfig)
    summary_model: str = ""  # model id for compaction summaries (default: the agent's)
    summary_timeout_secs: float = 120.0


class ReplySink(Protocol):
    def wake(self, channel: str) -> None: ...

    def handoff(self, message: OutboundMessage, row_id: int) -> None: ...

    async def notify(self, event: ChannelEvent) -> None: ...


@dataclass(slots=True)
class TurnOutcome:
    ok: bool
    stopped: bool = False
    error: str | None = None


@dataclass(slots=True)
class _Observer(TurnObserver):
    service: ExecutionService
    turn: OpenedTurn
    run_id: str
    event: ChannelEvent
    deltas: list[str] = field(default_factory=list)  # streamed text not yet passed on
    delta_sent_at: float = 0.0

    async def on_messages(self, new: Sequence[ChatMessage]) -> None:
        await self.service.store(self.turn, self.run_id, new)

    async def on_delta(self, text: str) -> None:
        """Streamed text goes on at most every `_DELTA_INTERVAL_SECS`, pieces
        that came sooner joined: a fast model's tokens cost a few events a
        second, not one each."""
        self.deltas.append(text)
        if time.monotonic() - self.delta_sent_at >= _DELTA_INTERVAL_SECS:
            await self.flush_deltas()

    async def flush_deltas(self) -> None:
        if not self.deltas:
            return
        text = "".join(self.deltas)
        self.deltas.clear()
        self.delta_sent_at = time.monotonic()
        await self.service.sink.notify(
            dataclasses.replace(self.event, kind=EventKind.DELTA, text=text)
        )


class _Typing:
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


def _user_text(item: InboundMessage, vision: bool) -> tuple[str, tuple[str, ...]]:
    parts: list[str] = []
    if item.reply_to:
        parts.append(f"[Replying to: {item.reply_to}]")
    if item.text:
        parts.append(item.text)
    images: list[str] = []
    for media in item.media:
        if media.kind is MediaKind.IMAGE and vision:
            images.append(media.path)
        else:
            label = media.name or media.kind.value
            parts.append(f"[Attached {media.kind.value}: {label} at {media.path}]")
    return "\n".join(parts), tuple(images)


def build_user_message(items: Sequence[WorkItem], vision: bool) -> ChatMessage:
    """One user message per turn; messages collected while busy are numbered."""
    if len(items) == 1:
        text, images = _user_text(items[0].message, vision)
        return ChatMessage.user(text, images)
    chunks = [f"[{len(items)} messages arrived while you were busy; answer them together.]"]
    all_images: list[str] = []
    for n, item in enumerate(items, 1):
        text, images = _user_text(item.message, vision)
        chunks.append(f"[{n}] {text}")
        all_images.extend(images)
    return ChatMessage.user("\n\n".join(chunks), tuple(all_images))


def user_facing_error(exc: ProviderError) -> str:
    """Short, safe text for the chat; details go to the log."""
    if isinstance(exc, ProviderConfigError):
        return f"The gateway is not set up to answer yet: {exc}"
    if isinstance(exc, ProviderAuthError):
        return "The model provider rejected the gateway's API key. Ask the operator to check it."
    if isinstance(exc, ProviderRateLimited | ProviderUnavailable):
        return "The model provider is unavailable right now, even after retrying. Please try again later."
    return "The model provider could not answer this request. The gateway log has the details."


class ExecutionService:
    def __init__(
        self,
        db: Database,
        sink: ReplySink,
        profiles: Mapping[str, AgentProfile],
        tool_settings: ToolSettings,
        *,
        opener: TurnOpener,
        after_turn: Callable[[str, str, str, AgentProfile], None] | None = None,
        typing_delay_secs: float = 0.0,
    ) -> None:
        self.db = db
        self.sink = sink
        self.profiles = profiles  # by channel name
        self.tool_settings = tool_settings
        self.opener = opener
        self.after_turn = after_turn
        self.typing_delay_secs = typing_delay_secs
        self.turn_latency: Callable[[str, float], None] | None = None
        self.scheduler: SchedulerService | None = None

    async def store(
        self,
        turn: OpenedTurn,
        run_id: str,
        new: Sequence[ChatMessage],
        then: Callable[[sqlite3.Connection], T | None] = lambda c: None,
        *,
        finishing: bool = False,
        on_commit: Callable[[T | None], None] | None = None,
    ) -> T | None:
        """Append `new` to the turn's session, then run `then`: one transaction,
        which first stores the turn's opening if that was deferred. `on_commit`
        runs after the commit even if this turn is cancelled meanwhile."""
        deferred = turn.deferred

        def fn(c: sqlite3.Connection) -> T | None:
            if deferred is not None:
                deferred.store(c, new, finishing=finishing)
            elif new:
                messages.append_messages(c, turn.session_id, new, run_id)
            return then(c)

        result = await self.db.write(fn, on_commit=on_commit)
        turn.deferred = None
        return result

    async def run_turn(
        self, items: Sequence[WorkItem], *, stop_requested: Callable[[], bool]
    ) -> TurnOutcome:
        message = items[0].message
        try:
            return await self._run_turn(items, stop_requested)
        except StaleTurn as exc:  # nothing of it was stored: run it again from storage
            log.error("turn_cache_stale", reason=str(exc))
            self.opener.forget(message.channel, message.chat_id)
            return await self._run_turn(items, stop_requested)
        except BaseException:  # whatever it stored, the cached history is not it
            self.opener.forget(message.channel, message.chat_id)
            raise

    async def _run_turn(
        self, items: Sequence[WorkItem], stop_requested: Callable[[], bool]
    ) -> TurnOutcome:
        first = items[0].message
        channel, chat_id = first.channel, first.chat_id
        run_id = f"{random.getrandbits(48):012x}"  # for logs: unique enough, no syscall
        inbox_ids = [i.inbox_id for i in items]
        profile = self.profiles.get(channel)
        if profile is None:  # e.g. a job targeting a channel that is not enabled
            log.error("turn_for_unknown_channel", channel=channel, chat_id=chat_id)
            await self.db.write(lambda c: inbox.mark_done(c, inbox_ids))
            return TurnOutcome(ok=False, error=f"no enabled channel named {channel!r}")
        sched: dict[str, Any] = first.metadata.get("scheduler") or {}
        silent = bool(sched.get("silent"))
        structlog.contextvars.bind_contextvars(channel=channel, run_id=run_id)
        started = time.monotonic()
        reply_to = reply_handle(items[-1].message)
        resume = items[0].resume
        new: list[ChatMessage] = []
        if not resume:
            if sched.get("system_prompt"):
                new.append(
                    ChatMessage.system(str(sched["system_prompt"]), Marker.SCHEDULED_SYSTEM_PROMPT)
                )
            new.append(build_user_message(items, profile.supports_vision))
        turn = await self.opener.open(
            channel=channel,
            chat_id=chat_id,
            base_id=session_base_id(channel, chat_id),
            resume_session=items[0].session_id if resume else None,
            fresh=bool(sched.get("fresh_session")) and not resume,
            new=new,
            inbox_ids=inbox_ids,
            run_id=run_id,
        )
        session_id, history = turn.session_id, turn.history
        structlog.contextvars.bind_contextvars(session_id=session_id)
        if turn.repaired:
            log.warning("transcript_repaired", missing_results=turn.repaired)

        event = ChannelEvent(EventKind.WORKING, channel, chat_id, session_id, run_id, "", reply_to)
        typing = _Typing(self.sink, event, None if silent else self.typing_delay_secs)
        await typing.start()
        observer = _Observer(self, turn, run_id, event)
        ctx = ToolContext(
            session_id=session_id,
            channel=channel,
            chat_id=chat_id,
            sender_id=first.sender_id,
            settings=self.tool_settings,
            message_id=first.message_id,
            run_id=run_id,
            scheduler=self.scheduler,
        )
        loop = AgentLoop(profile.provider, profile.tools, profile.loop)
        reply: ChatMessage | None = None
        text: str
        outcome: TurnOutcome
        try:
            result = await loop.run(history, ctx, observer)
            await observer.flush_deltas()  # the deltas add up to the whole reply
            reply = result.reply
            text = reply.content.strip() or "(the model returned an empty reply)"
            outcome = TurnOutcome(ok=True)
        except asyncio.CancelledError:
            if not stop_requested():
                log.info("turn_checkpointed")  # shutdown: recovery re-runs it
                raise
            log.info("turn_stopped")
            self.opener.forget(channel, chat_id)
            await self._finish(turn, items, run_id, None, STOPPED_REPLY, channel, chat_id, reply_to)
            raise
        except StaleTurn:
            raise
        except ProviderError as exc:
            log.error("turn_failed_provider", error=str(exc), error_type=type(exc).__name__)
            text = user_facing_error(exc)
            outcome = TurnOutcome(ok=False, error=text)
        except Exception as exc:
            log.exception("turn_failed")
            text = GENERIC_FAILURE
            outcome = TurnOutcome(ok=False, error=type(exc).__name__)
        finally:
            await typing.stop()
        target_chat = chat_id
        if silent:
            notify = sched.get("notify_chat_id")
            target_chat = str(notify) if notify else chat_id
            text = (
                "" if outcome.ok else (f"Scheduled task {sched.get('job_id', '?')} failed: {text}")
            )
        await self._finish(turn, items, run_id, reply, text, channel, target_chat, reply_to)
        if outcome.ok:
            self.opener.remember(channel, chat_id, turn)
        else:
            self.opener.forget(channel, chat_id)
        elapsed = time.monotonic() - started
        if self.turn_latency is not None:
            self.turn_latency(channel, elapsed)
        log.info("turn_done", ok=outcome.ok, secs=round(elapsed, 3), messages=len(items))
        if self.after_turn is not None and outcome.ok:
            self.after_turn(session_id, channel, chat_id, profile)
        return outcome

    async def _finish(
        self,
        turn: OpenedTurn,
        items: Sequence[WorkItem],
        run_id: str,
        reply: ChatMessage | None,
        text: str,
        channel: str,
        chat_id: str,
        reply_to: str,
    ) -> None:
        """The final assistant message, its outbox row and inbox → done: one commit."""
        inbox_ids = [i.inbox_id for i in items]
        session_id = turn.session_id
        out = OutboundMessage(
            channel=channel,
            chat_id=chat_id,
            text=text,
            reply_to_message_id=reply_to,
            session_id=session_id,
            metadata={"run_id": run_id},
        )

        def finish(c: sqlite3.Connection) -> int | None:
            row_id = outbox.enqueue(c, out, inbox_ids[-1]) if text else None
            inbox.mark_done(c, inbox_ids)
            return row_id

        def hand_over(row_id: int | None) -> None:
            if row_id is not None:
                self.sink.handoff(out, row_id)

        new = [reply] if reply is not None else []
        await self.store(turn, run_id, new, finish, finishing=True, on_commit=hand_over)
