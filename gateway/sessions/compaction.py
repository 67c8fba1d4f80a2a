"""Background compaction of conversation histories.

`Compactor` runs after a turn's reply is on its way (AGENT.md injection is part
of opening a turn: gateway/turns/opener.py). It reads a
snapshot, asks the provider for a summary (outside any lock: replies are never
blocked), then commits the new segment while the conversation is between turns,
carrying over whatever was appended meanwhile. A failed or conflicting
compaction changes nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from agent.compaction import (
    CompactionResult,
    CompactionState,
    compact,
    compaction_due,
    count_user_turns,
    estimate_tokens,
    should_compact,
    tokens_for_chars,
    trigger_tokens,
)
from gateway.bus import OutboundMessage, reply_handle
from gateway.i18n import Locale, Msg, tr
from gateway.lifecycle import cancel_and_wait
from gateway.ops import tracing
from gateway.sessions.manager import ConversationGates
from gateway.spend.payer import Payer, paying
from gateway.turns.agents import AgentProfile
from gateway.turns.execution import TurnEnd
from gateway.work import WorkItem
from storage.sql.conversations.commands import SessionStats
from storage.sql.conversations.compaction import CompactionConflict
from storage.store import Store

__all__ = ["Compactor"]

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class _Job:
    session_id: str
    channel: str
    chat_id: str
    profile: AgentProfile
    command: WorkItem | None = None  # a /compact waiting for its answer
    made: CompactionResult | None = None  # already summarised in the turn: commit it
    segment: int = 0  # the segment `made` was made from
    traceparent: str | None = None  # the trace it belongs to (gateway.ops.tracing)

    @property
    def locale(self) -> Locale:
        return self.command.locale if self.command is not None else Locale.EN


class Compactor:
    def __init__(
        self,
        store: Store,
        gates: ConversationGates,
        history_changed: Callable[[str, str], None],
        wake: Callable[[str], None],
        *,
        capacity: int = 256,
    ) -> None:
        self.store = store
        self.gates = gates
        self.history_changed = history_changed  # (channel, chat_id): drop cached history
        self.wake = wake
        self._queue: asyncio.Queue[_Job] = asyncio.Queue(capacity)
        self._queued: set[str] = set()
        self._states: dict[str, tuple[int, CompactionState]] = {}
        self._task: asyncio.Task[None] | None = None
        self.completed = 0
        self._progress = asyncio.Condition()
        self.queued = 0  # jobs taken: each reads the history (a turn's end only when due)

    # -- scheduling ----------------------------------------------------------
    def after_turn(self, end: TurnEnd) -> None:
        """Decided from the size the turn kept (O(1)); the history is read
        only when a compaction is due."""
        cfg = end.profile.compaction
        if not cfg.enabled:
            return
        job = _Job(
            end.session_id, end.channel, end.chat_id, end.profile, None, end.compaction,
            end.segment, end.traceparent,
        )  # fmt: skip
        if end.compaction is not None:
            self._offer(job)
            return
        state = self._states.get(end.session_id)
        known = state[1] if state is not None and state[0] == end.segment else None
        window = end.profile.context_window_tokens
        if compaction_due(end.size, window, cfg.trigger_ratio, cfg.keep_user_turns, known):
            self._offer(job)

    def request(self, item: WorkItem, session_id: str, profile: AgentProfile) -> bool:
        """Queue a forced compaction answering the /compact in `item`."""
        m = item.message
        parent = tracing.traceparent_of(item)
        job = _Job(session_id, m.channel, m.chat_id, profile, item, traceparent=parent)
        return self._offer(job, force=True)

    def _offer(self, job: _Job, *, force: bool = False) -> bool:
        if job.session_id in self._queued and not force:
            return True  # at most one compaction per session at a time
        try:
            self._queue.put_nowait(job)
        except asyncio.QueueFull:
            log.warning("compaction_queue_full", session_id=job.session_id)
            return False
        self._queued.add(job.session_id)
        self.queued += 1
        return True

    name = "compaction"

    async def start(self, tg: asyncio.TaskGroup) -> None:
        self._task = tg.create_task(self.run(), name="compactor")

    async def stop(self) -> None:
        """A compaction in progress is dropped: it changed nothing yet."""
        if self._task is not None:
            await cancel_and_wait([self._task])

    async def run(self) -> None:
        while True:
            job = await self._queue.get()
            reason = "after_turn" if job.command is None else "command"
            try:
                with tracing.compaction(reason, session_id=job.session_id, parent=job.traceparent):
                    reply = await self._compact(job)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("compaction_failed", session_id=job.session_id)
                reply = tr(job.locale, Msg.COMPACT_FAILED)
            finally:
                self._queued.discard(job.session_id)
            try:
                if job.command is not None:
                    await self._answer(job.command, reply)
            except asyncio.CancelledError:
                raise
            except Exception:  # the /compact stays unfinished and is retried at next start
                log.exception("compaction_answer_failed", session_id=job.session_id)
            finally:
                self._queue.task_done()

    async def drained(self) -> None:
        """Wait until every queued compaction has finished."""
        await self._queue.join()

    async def committed(self, count: int) -> None:
        """Wait until `count` compactions have been committed in all (a turn's
        reply can reach its chat before the turn has offered its compaction)."""
        async with self._progress:
            await self._progress.wait_for(lambda: self.completed >= count)

    # -- the work ------------------------------------------------------------
    async def _compact(self, job: _Job) -> str:
        p = job.profile
        cfg = p.compaction
        if job.made is not None:  # summarised in the turn: nothing to read
            result: CompactionResult | None = job.made
            segment = job.segment
            kept = [*job.made.kept_system, *job.made.recent]
            last_seq = kept[-1].seq if kept else None
        else:
            record, history = await self.store.history_snapshot(job.session_id)
            if record is None:
                return tr(job.locale, Msg.NOTHING_TO_COMPACT)
            segment = record.segment
            state = self._states.get(job.session_id)
            known = state[1] if state is not None and state[0] == segment else None
            window = p.context_window_tokens
            if job.command is None and not should_compact(
                history, window, cfg.trigger_ratio, cfg.keep_user_turns, known
            ):
                # due by size but nothing to fold (no boundary): wait for a new user turn
                size = CompactionState(estimate_tokens(history), count_user_turns(history))
                self._states[job.session_id] = (segment, size)
                return ""
            with paying(Payer(job.channel, job.chat_id, "", kind="compaction", gated=False)):
                result = await compact(
                    history,
                    p.provider,
                    p.summary_model,
                    window,
                    cfg.keep_user_turns,
                    timeout_secs=p.summary_timeout_secs,
                )
            last_seq = history[-1].seq if history else None
        if result is None:
            return tr(job.locale, Msg.COMPACT_TOO_SHORT, keep=cfg.keep_user_turns)
        if not result.shrunk:
            self._states[job.session_id] = (segment, CompactionState.after(result))
            return tr(job.locale, Msg.COMPACT_NO_GAIN)
        try:
            async with self.gates.hold((job.channel, job.chat_id)):
                segment = await self.store.commit_compaction(
                    job.session_id, segment, result.new_history, last_seq
                )
                self.history_changed(job.channel, job.chat_id)
        except CompactionConflict as exc:
            log.info("compaction_conflict", session_id=job.session_id, reason=str(exc))
            return tr(job.locale, Msg.COMPACT_CONFLICT)
        self._states[job.session_id] = (segment, CompactionState.after(result))
        self.completed += 1
        async with self._progress:
            self._progress.notify_all()
        return tr(
            job.locale,
            Msg.COMPACTED_SUMMARISED if result.summarised else Msg.COMPACTED_TRUNCATED,
            before=result.estimate_before,
            after=result.estimate_after,
            keep=cfg.keep_user_turns,
        )

    async def _answer(self, item: WorkItem, text: str) -> None:
        m = item.message
        out = OutboundMessage(m.channel, m.chat_id, text, reply_to_message_id=reply_handle(m))
        await self.store.answer([item.inbox_id], out)
        self.wake(m.channel)

    # -- /status -------------------------------------------------------------
    @staticmethod
    def status_line(stats: SessionStats, profile: AgentProfile, locale: Locale) -> str:
        tokens = tokens_for_chars(stats.chars)
        window = profile.context_window_tokens
        trigger = trigger_tokens(window, profile.compaction.trigger_ratio)
        return tr(
            locale,
            Msg.STATUS_CONTEXT,
            tokens=tokens,
            share=tokens / window,
            window=window,
            trigger=trigger,
        )
