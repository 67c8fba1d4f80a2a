"""ExecutionService: one turn of one conversation, from inbox rows to outbox rows.

A turn runs in three phases: open (the session, its history and the new
messages: gateway.turns.opener; a person's chat idle past its reset cutoff gets a new
session: gateway.turns.session_reset), run (the agent loop, typing, streaming and
tool progress: gateway.turns.tool_progress), and
finish (the reply and the inbox rows closed in one commit). What the turn was
asked for — which agent, which session, where the reply goes — comes from the
inbound message's `TurnRequest`, stored with its inbox row.

Order of writes (each a committed transaction before the next step):
  1. the user message + inbox rows → `started`
  2. each assistant tool-call message, then its tool results (AgentLoop observer)
  3. the final assistant message + the outbox row(s) + inbox rows → `done`
When the turn opened from the cached history (gateway.turns.opener), 1 is stored in
the same transaction as the first of 2 or 3. A crash before that leaves the
inbox rows `received` and recovery runs the turn as new; a crash between 1 and
3 leaves them `started` and recovery re-runs the turn on the persisted history
(dangling tool calls repaired) without a second user message. A crash after 3
only leaves outbox rows to send, which the sender gets straight from the
commit (`ReplySink.handoff`) or, after a restart, from the outbox. A storage
failure is such a crash too, inside the agent loop as well: the turn raises it
(`StorageUnavailable` when the database refused the write for now, which
gateway.sessions.manager retries in-process once writes pass, as recovery would); a
turn that breaks on anything else outside the agent loop is answered as a
failed turn and its rows closed (`_broken`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import structlog

from agent.compaction import CompactionResult
from agent.context import TurnFacts
from agent.loop import AgentLoop, LoopSettings
from agent.messages import ChatMessage, HistorySize, Marker
from agent.providers.base import ProviderError
from agent.subagents.types import TASK_TOOL
from agent.tools.base import NO_SERVICES, ToolContext, ToolServices, ToolSettings
from agent.turn_control import ApprovalRequired, TurnSteered
from gateway.approvals.service import Approvals, PauseRequest, TurnControls, TurnStop
from gateway.bus import (
    FAILED_TURN,
    ChatType,
    InboundMessage,
    OutboundMessage,
    SessionPolicy,
)
from gateway.clock import Clock, utc_now
from gateway.i18n import Msg, tr
from gateway.ops import tracing
from gateway.spend.payer import Payer, paying
from gateway.turns.agents import AgentDirectory, AgentProfile, UnknownAgent
from gateway.turns.chat_policy import DEFAULT_POLICY, ChatPolicy
from gateway.turns.feedback import TurnRecorder, TypingSignal
from gateway.turns.opener import OpenedTurn, StaleTurn, TurnOpener, user_message_seq
from gateway.turns.plan import TurnPlan
from gateway.turns.replies import build_user_message, unknown_agent, user_facing_error
from gateway.turns.tool_progress import ToolDisplay, ToolProgress
from gateway.turns.transcription import transcribe_items
from gateway.work import PAUSED_OUTCOME, ReplySink, TurnOutcome, WorkItem, session_base_id
from storage.database import STORAGE_ERRORS
from storage.errors import StorageUnavailable
from storage.sql.conversations.turns import Opening
from storage.store import Store

__all__ = ["AfterTurn", "ExecutionService", "TurnEnd"]

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class TurnEnd:
    """A turn that ended whole, for what runs after it (compaction)."""

    session_id: str
    segment: int  # the active segment the turn ran in
    channel: str
    chat_id: str
    profile: AgentProfile
    size: HistorySize  # of that whole segment, counted as the turn ran
    compaction: CompactionResult | None = None  # made in the turn (a refused request)
    traceparent: str | None = None  # of the message the turn answered, while tracing


AfterTurn = Callable[[TurnEnd], None]


class ExecutionService:
    def __init__(
        self,
        store: Store,
        sink: ReplySink,
        agents: AgentDirectory,
        tool_settings: ToolSettings,
        *,
        opener: TurnOpener,
        services: ToolServices = NO_SERVICES,
        after_turn: AfterTurn | None = None,
        turn_latency: Callable[[str, float], None] | None = None,
        typing_delay_secs: float = 0.0,
        chat_policies: Mapping[str, ChatPolicy] | None = None,
        clock: Clock = utc_now,
        approvals: Approvals | None = None,
        is_admin: Callable[[InboundMessage], bool] = lambda message: False,
    ) -> None:
        """`chat_policies`: per channel (default: no resets, no tool progress);
        `clock`: now, timezone-aware (tests move it across reset times);
        `approvals`: tool calls held for a person's yes (None: none are);
        `is_admin`: whether a sender's turns are exempt from budgets."""
        self.store = store
        self.sink = sink
        self.agents = agents
        self.tool_settings = tool_settings
        self.opener = opener
        self.services = services
        self.after_turn = after_turn
        self.turn_latency = turn_latency
        self.typing_delay_secs = typing_delay_secs
        self.chat_policies = dict(chat_policies or {})
        self.clock = clock
        self.approvals = approvals
        self.is_admin = is_admin

    async def run_turn(
        self,
        items: Sequence[WorkItem],
        *,
        stop_requested: Callable[[], bool],
        steer_requested: Callable[[], bool] | None = None,
    ) -> TurnOutcome:
        """`steer_requested`: a newer message wants the turn to end at its next
        safe boundary (gateway.sessions.manager, queue mode steer)."""
        channel, chat_id = items[0].conversation
        plan = TurnPlan.of(items)
        # a job that reports only failures has nobody to ask: held calls are refused
        controls = TurnControls(self.approvals, steer_requested, can_pause=not plan.silent)
        structlog.contextvars.bind_contextvars(channel=plan.channel, run_id=plan.run_id)
        first = plan.items[0].message
        payer = Payer(
            channel, chat_id, first.sender_id, self.is_admin(first), plan.locale,
            run_id=plan.run_id,
        )  # fmt: skip
        with tracing.turn(plan.items, plan.run_id) as span:  # the turn's span, if tracing
            try:
                with paying(payer):  # every model call of the turn, sub-agents too (gateway.spend)
                    try:
                        outcome = await self._run_turn(plan, stop_requested, controls)
                    except StaleTurn as exc:  # nothing was stored: run it again from storage
                        log.error("turn_cache_stale", reason=str(exc))
                        self.opener.forget(channel, chat_id)
                        outcome = await self._run_turn(plan, stop_requested, controls)
            except Exception as exc:  # whatever it stored, the cached history is not it
                self.opener.forget(channel, chat_id)
                outcome = await self._broken(plan, exc)
            except BaseException:
                self.opener.forget(channel, chat_id)
                raise
            span.set_attribute("picobot.turn.ok", outcome.ok)
            return outcome

    async def _run_turn(
        self, plan: TurnPlan, stop_requested: Callable[[], bool], controls: TurnControls
    ) -> TurnOutcome:
        items = plan.items
        started = time.monotonic()
        try:
            profile = self.agents.resolve(plan.channel, plan.request.agent)
        except UnknownAgent as exc:
            return await self._refuse(plan, exc)
        if self.approvals is not None and not await self.approvals.before_turn(
            plan.items[0],
            profile.tools,
            lambda session_id, asker: self._tool_context(plan, session_id, None, asker),
            run_id=plan.run_id,
            max_chars=profile.loop.tool_result_max_chars,
            stop=TurnStop(stop_requested, plan.inbox_ids, plan.reply_to, plan.locale),
            progress=lambda session_id: self._progress(plan, session_id),
        ):
            return TurnOutcome(ok=True)  # answered already: nothing to carry on
        turn = await self._open(plan, profile)
        reply, text, outcome = await self._run(plan, profile, turn, stop_requested, controls)
        if outcome.paused:
            self.opener.forget(plan.channel, plan.chat_id)
            return outcome
        await self._finish(plan, turn, reply, plan.deliver(outcome, text), failed=not outcome.ok)
        if outcome.ok:
            self.opener.remember(plan.channel, plan.chat_id, turn)
        else:
            self.opener.forget(plan.channel, plan.chat_id)
        elapsed = time.monotonic() - started
        if self.turn_latency is not None:
            self.turn_latency(plan.channel, elapsed)
        log.info("turn_done", ok=outcome.ok, secs=round(elapsed, 3), messages=len(items))
        if self.after_turn is not None and outcome.ok:
            self.after_turn(
                TurnEnd(
                    turn.session_id, turn.segment, plan.channel, plan.chat_id, profile,
                    turn.size_now(), turn.compaction, tracing.traceparent_of(plan.items[0]),
                )
            )  # fmt: skip
        return outcome

    # -- phases ------------------------------------------------------------------
    def _tool_context(
        self,
        plan: TurnPlan,
        session_id: str,
        seq: int | None,
        asker: InboundMessage | None = None,
    ) -> ToolContext:
        """`asker`: whose calls run (an approval's), if not the turn's first message's."""
        message = asker or plan.items[0].message
        return ToolContext(
            session_id=session_id,
            channel=plan.channel,
            chat_id=plan.chat_id,
            sender_id=message.sender_id,
            settings=self.tool_settings,
            message_id=message.message_id,
            message_seq=seq,
            run_id=plan.run_id,
            services=self.services,
            reply_to=plan.reply_to,
        )

    async def _open(self, plan: TurnPlan, profile: AgentProfile) -> OpenedTurn:
        resume = plan.items[0].resume
        request = plan.request
        new: list[ChatMessage] = []
        if not resume:
            if request.system_prompt:
                new.append(
                    ChatMessage.system(request.system_prompt, Marker.SCHEDULED_SYSTEM_PROMPT)
                )
            notes = await transcribe_items(plan.items, profile.transcriber)
            new.append(build_user_message(plan.items, profile.supports_vision, notes))
        fresh = request.session is SessionPolicy.FRESH and not resume
        policy = self._policy(plan.channel)
        reset = (
            None
            if resume or fresh
            else policy.session_reset(request.origin, self.clock(), plan.locale)
        )
        turn = await self.opener.open(
            Opening(
                plan.channel,
                plan.chat_id,
                session_base_id(plan.channel, plan.chat_id),
                plan.items[0].session_id if resume else None,
                fresh,
                tuple(new),
                plan.inbox_ids,
                plan.run_id,
                reset,
                # a sub-agent the crash interrupted runs again, from its transcript
                rerun=frozenset({TASK_TOOL}) if resume else frozenset(),
                budget_chars=profile.open_budget_chars,
            )
        )
        structlog.contextvars.bind_contextvars(session_id=turn.session_id)
        if turn.archived is not None:
            log.info("session_reset", archived=turn.archived)
        if turn.notice is not None:
            self.sink.handoff(*turn.notice)
        if turn.repaired:
            log.warning("transcript_repaired", missing_results=turn.repaired)
        return turn

    def _policy(self, channel: str) -> ChatPolicy:
        return self.chat_policies.get(channel, DEFAULT_POLICY)

    def _progress(self, plan: TurnPlan, session_id: str) -> ToolProgress:
        """The turn's tool calls (approved ones run before it too) shown in its chat."""
        display = ToolDisplay.OFF if plan.silent else self._policy(plan.channel).tools
        return ToolProgress(self.sink, plan.working(session_id), display)

    async def _run(
        self,
        plan: TurnPlan,
        profile: AgentProfile,
        turn: OpenedTurn,
        stop_requested: Callable[[], bool],
        controls: TurnControls,
    ) -> tuple[ChatMessage | None, str, TurnOutcome]:
        """The agent loop with typing and streaming around it: the reply (None
        when the turn failed), the text for the chat, and the outcome."""
        first = plan.items[0].message
        event = plan.working(turn.session_id)
        typing = TypingSignal(self.sink, event, None if plan.silent else self.typing_delay_secs)
        await typing.start()
        progress = self._progress(plan, turn.session_id)
        observer = TurnRecorder(self.store, self.sink, turn, plan.run_id, event, progress)
        ctx = self._tool_context(plan, turn.session_id, user_message_seq(turn))
        try:
            context = await profile.context.prepare(
                TurnFacts(
                    turn.session_id,
                    plan.channel,
                    plan.chat_id,
                    first.sender_id,
                    profile.name,
                    private=first.chat_type is ChatType.DIRECT,
                )
            )
            settings = _capped(profile.loop, plan.request.max_tokens)
            loop = AgentLoop(profile.provider, profile.tools, settings, rescue=profile.rescue)
            result = await loop.run(
                turn.history,
                ctx,
                observer,
                context,
                control=controls,
                history_chars=turn.size_now().chars,
            )
            turn.compaction = result.compaction
            await observer.finish_deltas()
            await progress.flush()
            reply = result.reply
            text = reply.content.strip() or tr(plan.locale, Msg.EMPTY_REPLY)
            return reply, text, TurnOutcome(ok=True)
        except ApprovalRequired as held:
            await progress.flush()
            await self._pause(plan, turn, held)
            return None, "", PAUSED_OUTCOME
        except TurnSteered as steered:
            log.info("turn_steered", rounds=steered.rounds)
            await progress.flush()
            return None, "", TurnOutcome(ok=True)  # the steering message's turn answers
        except asyncio.CancelledError:
            if not stop_requested():
                log.info("turn_checkpointed")  # shutdown: recovery re-runs it
                raise
            log.info("turn_stopped")
            self.opener.forget(plan.channel, plan.chat_id)
            await self._finish(plan, turn, None, (plan.chat_id, tr(plan.locale, Msg.STOPPED)))
            raise
        except (StaleTurn, StorageUnavailable):
            raise  # StorageUnavailable: what it stored is incomplete; run again (gateway.sessions.manager)
        except ProviderError as exc:
            log.error("turn_failed_provider", error=str(exc), error_type=type(exc).__name__)
            await progress.flush()
            text = user_facing_error(plan.locale, exc)
            return None, text, TurnOutcome(ok=False, error=text)
        except Exception as exc:
            log.exception("turn_failed")
            await progress.flush()
            failure = tr(plan.locale, Msg.GENERIC_FAILURE)
            return None, failure, TurnOutcome(ok=False, error=type(exc).__name__)
        finally:
            await typing.stop()

    async def _pause(self, plan: TurnPlan, turn: OpenedTurn, held: ApprovalRequired) -> None:
        assert self.approvals is not None
        await self.approvals.pause(
            PauseRequest(
                turn.session_id,
                plan.run_id,
                plan.items[0].message,
                plan.inbox_ids,
                held.assistant,
                held.held,
                turn.deferred,
                plan.items[0].approval_id,
                plan.locale,
            )
        )
        turn.deferred = None

    async def _finish(
        self,
        plan: TurnPlan,
        turn: OpenedTurn,
        reply: ChatMessage | None,
        delivery: tuple[str, str],
        *,
        failed: bool = False,
    ) -> None:
        """The final assistant message, its outbox row and inbox → done: one commit.
        A failed turn's messages are kept but left out of later histories, so
        the question the user is asked to repeat is not sent to the model twice."""
        chat_id, text = delivery
        out = (
            OutboundMessage(
                channel=plan.channel,
                chat_id=chat_id,
                text=text,
                reply_to_message_id=plan.reply_to,
                session_id=turn.session_id,
                run_id=plan.run_id,
                locale=plan.locale.value,
                metadata=dict(FAILED_TURN) if failed else {},
            )
            if text
            else None
        )
        out = tracing.stamped(plan.items[0], out)

        def hand_over(row_id: int | None) -> None:
            if out is not None and row_id is not None:
                self.sink.handoff(out, row_id)

        approval_id = plan.items[0].approval_id
        if approval_id is not None:  # the approval it carried on from is done with it
            await self.store.approvals.finish_turn(
                approval_id, turn.session_id, plan.run_id, reply, turn.deferred, out,
                plan.inbox_ids, on_commit=hand_over, failed=failed,
            )  # fmt: skip
            if self.approvals is not None:
                self.approvals.finished(plan.channel, plan.chat_id, approval_id)
        else:
            await self.store.finish_turn(
                turn.session_id,
                plan.run_id,
                reply,
                turn.deferred,
                out,
                plan.inbox_ids,
                on_commit=hand_over,
                failed=failed,
            )
        turn.deferred = None

    async def _broken(self, plan: TurnPlan, exc: Exception) -> TurnOutcome:
        """A turn that broke outside the agent loop (which answers its own
        failures), on what nothing foresaw: a bug, a stored row that no longer
        reads. The asker is told as of a failed turn and the inbox rows are
        closed (with the approval the turn carried on from, if any), so the
        message is neither left unanswered until a restart nor broken again by
        it. Not when storage itself failed: that is a crash, and the retry
        (gateway.sessions.manager) or recovery at the next start carries the turn out."""
        if isinstance(exc, STORAGE_ERRORS):
            raise exc
        log.error("turn_crashed", exc_info=exc, answered=True)
        text = tr(plan.locale, Msg.GENERIC_FAILURE)
        outcome = TurnOutcome(ok=False, error=type(exc).__name__)
        chat_id, notice = plan.deliver(outcome, text)
        out = None
        if notice:
            out = OutboundMessage(
                plan.channel, chat_id, notice, reply_to_message_id=plan.reply_to,
                run_id=plan.run_id, locale=plan.locale.value,
            )  # fmt: skip
        out = tracing.stamped(plan.items[0], out)
        approval_id = plan.items[0].approval_id
        try:
            if approval_id is None:
                row_id = await self.store.close_broken_turn(plan.run_id, plan.inbox_ids, out)
            else:
                row_id = await self.store.approvals.close_broken_turn(
                    approval_id, plan.run_id, plan.inbox_ids, out
                )
        except Exception:  # the rows stay: recovery at the next start
            log.exception("turn_crash_unanswered")
            return outcome
        if approval_id is not None and self.approvals is not None:
            self.approvals.finished(plan.channel, plan.chat_id, approval_id)
        if out is not None and row_id is not None:
            self.sink.handoff(out, row_id)
        return outcome

    async def _refuse(self, plan: TurnPlan, exc: UnknownAgent) -> TurnOutcome:
        """A turn for an agent or channel this gateway does not have: nothing
        runs; the asker is told where that is possible."""
        log.error("turn_refused", reason=str(exc), chat_id=plan.chat_id)
        out = None
        if plan.channel in self.agents.channel_agents and plan.request.agent is not None:
            outcome = TurnOutcome(ok=False, error=unknown_agent(plan.locale, plan.request.agent))
            chat_id, text = plan.deliver(outcome, outcome.error or "")
            out = OutboundMessage(plan.channel, chat_id, text, reply_to_message_id=plan.reply_to)
        out = tracing.stamped(plan.items[0], out)
        row_id = await self.store.answer(plan.inbox_ids, out)
        if out is not None and row_id is not None:
            self.sink.handoff(out, row_id)
        return TurnOutcome(ok=False, error=str(exc))


def _capped(settings: LoopSettings, max_tokens: int | None) -> LoopSettings:
    """A scheduled run's own token cap, where it is below the agent's."""
    if max_tokens is None:
        return settings
    caps = [c for c in (settings.max_turn_tokens, max_tokens) if c is not None]
    return dataclasses.replace(settings, max_turn_tokens=min(caps))
