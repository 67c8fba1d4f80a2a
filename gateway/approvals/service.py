"""Approvals: tool calls held for a person's yes, from the pause to the turn that carries on.

When the agent loop stops before a held batch (`agent.turn_control`),
`pause` stores the batch and the chat's request in one commit
(storage/sql/approvals.py) and closes the turn: the conversation is free again. An answer
(`answer`: /approve, /deny, a button; `decide`: the console) or the timeout
(gateway.approvals.timeouts) decides it; a decided approval goes back into its
conversation's queue as a `WorkItem` with `approval_id`, and that turn first
`settle`s the batch:
approved calls run (after `executing` is committed, so a crash never runs
them twice: a call interrupted by one reads "[interrupted]"; a /stop makes
them "[cancelled]" and ends the approval), refused ones read "[denied …]".
Then the loop carries on and its reply closes the approval. A newer message
instead refuses it and settles it in its own turn (`before_turn`).

At start every open approval is taken up again: decided ones are queued,
pending ones wait for their answer or their deadline, and one a newer
message refused waits for that message, which the inbox recovery runs again.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta

import structlog

from agent.approval import ApprovalPolicy
from agent.context import cut_tool_result
from agent.messages import CANCELLED_RESULT, INTERRUPTED_RESULT, ChatMessage, ToolCall
from agent.tools.base import ToolCallWatcher, ToolContext, ToolRegistry
from gateway.access.policy import AccessPolicy, sender_ids
from gateway.approvals.texts import SUPERSEDED, denied_result, request_text
from gateway.approvals.timeouts import ApprovalTimeouts
from gateway.bus import (
    ApprovalAsk,
    ChatType,
    Decision,
    InboundMessage,
    OutboundMessage,
    reply_handle,
)
from gateway.clock import Clock, utc_now
from gateway.i18n import Locale, Msg, tr
from gateway.lifecycle import cancel_and_wait
from gateway.work import ReplySink, WorkItem
from storage.sql.approvals import ApprovalRecord, ApprovalState, NewApproval, Paused
from storage.sql.conversations.turns import DeferredOpening
from storage.store import Store

__all__ = ["Approvals", "PauseRequest", "TurnControls", "TurnStop"]

log = structlog.get_logger(__name__)

Key = tuple[str, str]
# the chat's tool progress for approved calls run in a session (by its id)
Progress = Callable[[str], ToolCallWatcher]
_DECIDED = (ApprovalState.APPROVED, ApprovalState.DENIED)
_ID_ARG = re.compile(r"^#?(\d{1,18})(?:\s+(.*))?$", re.DOTALL)


@dataclass(frozen=True, slots=True)
class PauseRequest:
    """A turn that stops before a held batch."""

    session_id: str
    run_id: str
    message: InboundMessage  # the turn's first message: who asked, where it resumes
    inbox_ids: tuple[int, ...]
    assistant: ChatMessage  # the stored message whose calls are held
    held: tuple[ToolCall, ...]
    deferred: DeferredOpening | None
    previous: int | None  # the approval this turn carried on from
    locale: Locale = Locale.EN  # of the request the chat gets


@dataclass(frozen=True, slots=True)
class TurnStop:
    """/stop for a turn that settles an approval before it opens: whether it
    was asked for, and what the stop notice answers."""

    requested: Callable[[], bool]
    inbox_ids: tuple[int, ...]  # the stopped turn's
    reply_to: str
    locale: Locale


@dataclass(frozen=True, slots=True)
class TurnControls:
    """What may end one turn early (`agent.turn_control.TurnControl`): held
    calls (None: no approvals) and a steering message (None: never)."""

    approvals: Approvals | None
    steer: Callable[[], bool] | None = None
    can_pause: bool = True  # False in a sub-agent: held calls are refused instead

    def held(self, calls: Sequence[ToolCall], ctx: ToolContext) -> Sequence[ToolCall]:
        return self.approvals.held(calls, ctx) if self.approvals is not None else ()

    def steer_requested(self) -> bool:
        return self.steer is not None and self.steer()


class Approvals:
    name = "approvals"

    def __init__(
        self,
        store: Store,
        policy: ApprovalPolicy,
        sink: ReplySink,
        *,
        access: AccessPolicy | None = None,
        clock: Clock = utc_now,
    ) -> None:
        """`dispatch` (set by the composition root once the sessions exist)
        queues a turn for its conversation."""
        self.store = store
        self.policy = policy
        self.sink = sink
        self.access = access
        self.clock = clock
        self.dispatch: Callable[[WorkItem], bool] | None = None
        self._open: dict[Key, set[int]] = {}
        self.timeouts = ApprovalTimeouts(store, self._queue, clock)
        self._task: asyncio.Task[None] | None = None

    # -- lifecycle -------------------------------------------------------------
    async def start(self, tg: asyncio.TaskGroup) -> None:
        """After the sessions, before the inbox recovery: decided approvals
        are queued at once."""
        for record in await self.store.approvals.open():
            self._index(record)
            if record.state is ApprovalState.PENDING:
                self.timeouts.add(record.expires_at, record.id)
            elif record.decided_by != SUPERSEDED:
                self._queue(record)
            # else a newer message refused it and died before its results were
            # stored: that message is recovered from the inbox, and its turn
            # settles this one first (`before_turn`), so it gets no turn of its own
        self._task = tg.create_task(self.timeouts.run(), name="approval-timeouts")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task])

    # -- the loop's side ---------------------------------------------------------
    def held(self, calls: Sequence[ToolCall], ctx: ToolContext) -> list[ToolCall]:
        return self.policy.held(calls, ctx.workspace) if self.policy.active else []

    def has_open(self, channel: str, chat_id: str) -> bool:
        return bool(self._open.get((channel, chat_id)))

    async def pause(self, req: PauseRequest) -> int:
        """Store the held batch and the chat's request; the approval's id."""
        m = req.message
        tools = tuple(dict.fromkeys(c.name for c in req.held))

        def prompt(approval_id: int) -> OutboundMessage:
            return OutboundMessage(
                m.channel,
                m.chat_id,
                request_text(approval_id, req.held, self.policy.timeout_secs, req.locale),
                reply_to_message_id=reply_handle(m),
                session_id=req.session_id,
                metadata=ApprovalAsk(
                    approval_id,
                    tools,
                    group=m.chat_type is ChatType.GROUP,
                    approve_label=tr(req.locale, Msg.TOOL_APPROVAL_APPROVE_BUTTON),
                    deny_label=tr(req.locale, Msg.TOOL_APPROVAL_DENY_BUTTON),
                ).metadata(),
            )

        def hand_over(paused: Paused) -> None:
            self.sink.handoff(paused.prompt, paused.outbox_id)

        new = NewApproval(
            req.session_id,
            m.channel,
            m.chat_id,
            m.sender_id,
            m,
            req.inbox_ids,
            req.assistant.tool_calls,
            tuple(c.id for c in req.held),
            self.clock() + timedelta(seconds=self.policy.timeout_secs),
            req.run_id,
        )
        paused = await self.store.approvals.pause_turn(
            new, req.run_id, req.deferred, prompt, req.previous, on_commit=hand_over
        )
        if req.previous is not None:
            self._closed(m.channel, m.chat_id, req.previous)
        self._open.setdefault((m.channel, m.chat_id), set()).add(paused.approval_id)
        self.timeouts.add(new.expires_at, paused.approval_id)
        log.info("approval_requested", approval_id=paused.approval_id, tools=list(tools))
        return paused.approval_id

    async def before_turn(
        self,
        item: WorkItem,
        tools: ToolRegistry,
        context: Callable[[str, InboundMessage], ToolContext],
        *,
        run_id: str,
        max_chars: int,
        stop: TurnStop | None = None,
        progress: Progress | None = None,
    ) -> bool:
        """Before a turn opens: the approval it carries on from gets its
        batch's results (False: answered already, nothing to carry on); a new
        message first closes what its chat left waiting (refused, unless it
        was approved meanwhile: then those calls run first). `stop`: a /stop
        while approved calls run ends the approval with their results
        "[cancelled]" and answers the turn with the stop notice."""
        if item.approval_id is not None:
            return await self.settle(
                item.approval_id, tools, context, run_id=run_id, max_chars=max_chars, stop=stop,
                progress=progress,
            )  # fmt: skip
        for approval_id in self.open_ids(*item.conversation):
            await self.settle(
                approval_id, tools, context, run_id=run_id, max_chars=max_chars,
                superseded=True, stop=stop, progress=progress,
            )  # fmt: skip
        return True

    async def settle(
        self,
        approval_id: int,
        tools: ToolRegistry,
        context: Callable[[str, InboundMessage], ToolContext],
        *,
        run_id: str,
        max_chars: int,
        progress: Progress | None = None,
        superseded: bool = False,
        stop: TurnStop | None = None,
    ) -> bool:
        """The batch's results into the session: True when the turn carries
        on from them, False when there is nothing to carry on (answered
        already, or `superseded`: a newer message takes over)."""
        record = await self.store.approvals.get(approval_id)
        if record is not None and record.state is ApprovalState.PENDING and superseded:
            await self.store.approvals.move(
                approval_id, [ApprovalState.PENDING], ApprovalState.DENIED,
                approved=False, decided_by=SUPERSEDED,
            )  # fmt: skip
            record = await self.store.approvals.get(approval_id)
        if record is not None and record.state is ApprovalState.DONE and superseded:
            self._closed(record.channel, record.chat_id, approval_id)  # e.g. its session deleted
        if record is None or record.state in (ApprovalState.DONE, ApprovalState.PENDING):
            return False
        if record.state is ApprovalState.SETTLED:
            if superseded:
                await self.close(record)
            return not superseded
        refused = set(record.held) if not record.approved else set()
        to_run = [c for c in record.calls if c.id not in refused]
        ran: dict[str, str] = {}
        denial = denied_result(record.reason, record.decided_by, self.policy.timeout_secs)
        if record.state in _DECIDED and to_run:
            # committed before anything runs: after a crash these read "[interrupted]"
            if not await self.store.approvals.move(approval_id, _DECIDED, ApprovalState.EXECUTING):
                return False
            try:
                # as the person whose turn asked for them, even when a newer message settles them
                watcher = progress(record.session_id) if progress is not None else None
                results = await tools.execute_batch(
                    to_run, context(record.session_id, record.message), watcher
                )
            except asyncio.CancelledError:
                if stop is not None and stop.requested():  # /stop, not a shutdown
                    await self._stopped(record, refused, denial, run_id, stop)
                raise
            ran = {r.call.id: cut_tool_result(r.content, max_chars) for r in results}
        messages = [
            ChatMessage.tool_result(
                c, denial if c.id in refused else ran.get(c.id, INTERRUPTED_RESULT)
            )
            for c in record.calls
        ]
        if not await self.store.approvals.settle(approval_id, run_id, messages, done=superseded):
            return False
        log.info("approval_settled", approval_id=approval_id, ran=len(ran), refused=len(refused))
        if superseded:
            self._closed(record.channel, record.chat_id, approval_id)
        return not superseded

    async def _stopped(
        self, record: ApprovalRecord, refused: set[str], denial: str, run_id: str, stop: TurnStop
    ) -> None:
        """/stop cancelled the approved calls: they read "[cancelled]", as in
        any stopped turn, and the approval is done (one commit with the notice)."""
        results = [
            ChatMessage.tool_result(c, denial if c.id in refused else CANCELLED_RESULT)
            for c in record.calls
        ]
        out = OutboundMessage(
            record.channel,
            record.chat_id,
            tr(stop.locale, Msg.STOPPED),
            reply_to_message_id=stop.reply_to,
            session_id=record.session_id,
            run_id=run_id,
            locale=stop.locale.value,
        )

        def hand_over(row_id: int | None) -> None:
            if row_id is not None:
                self.sink.handoff(out, row_id)

        try:
            await self.store.approvals.stop(
                record.id, run_id, results, out, stop.inbox_ids, on_commit=hand_over
            )
        except Exception:  # the caller re-raises the stop's CancelledError either way
            # it stays executing: the chat's next message (or the next start) reads "[interrupted]"
            log.exception("approval_stop_failed", approval_id=record.id)
            return
        self._closed(record.channel, record.chat_id, record.id)
        log.info("approval_stopped", approval_id=record.id)

    def open_ids(self, channel: str, chat_id: str) -> list[int]:
        return sorted(self._open.get((channel, chat_id), ()))

    async def close(self, record: ApprovalRecord) -> None:
        await self.store.approvals.move(record.id, tuple(ApprovalState), ApprovalState.DONE)
        self._closed(record.channel, record.chat_id, record.id)

    def finished(self, channel: str, chat_id: str, approval_id: int) -> None:
        """The turn that carried on from `approval_id` committed its reply."""
        self._closed(channel, chat_id, approval_id)

    # -- answers -------------------------------------------------------------------
    async def answer(
        self, message: InboundMessage, decision: Decision, args: str, locale: Locale
    ) -> str | None:
        """/approve [N] or /deny [N] [reason] from `message`: None when it was
        taken (the turn that carries on answers the chat), else why not."""
        key = (message.channel, message.chat_id)
        match = _ID_ARG.match(args.strip())
        reason = args.strip() or None
        if match is not None:  # a number first names the approval (buttons send one)
            approval_id, reason = int(match[1]), (match[2] or "").strip() or None
            if approval_id not in self._open.get(key, ()):
                return tr(locale, Msg.TOOL_APPROVAL_NOT_WAITING, id=approval_id)
        elif open_ids := self.open_ids(*key):
            approval_id = open_ids[-1]
        else:
            return tr(locale, Msg.TOOL_APPROVAL_NONE)
        record = await self.store.approvals.get(approval_id)
        if record is None or record.state is not ApprovalState.PENDING:
            return tr(locale, Msg.TOOL_APPROVAL_ANSWERED, id=approval_id)
        if not self._may_answer(message, record):
            return tr(locale, Msg.TOOL_APPROVAL_NOT_YOURS)
        by = f"{message.channel}:{message.sender_id}"
        if not await self.decide(approval_id, decision, reason, by):
            return tr(locale, Msg.TOOL_APPROVAL_ANSWERED, id=approval_id)
        return None

    async def decide(
        self, approval_id: int, decision: Decision, reason: str | None, by: str
    ) -> bool:
        """Decide the pending approval `approval_id` as `by` (who may is the
        caller's judgement: `answer` for a chat, the console for an admin) and
        queue the turn that carries on; False when it was not pending."""
        approved = decision is Decision.APPROVE
        to = ApprovalState.APPROVED if approved else ApprovalState.DENIED
        if not await self.store.approvals.move(
            approval_id, [ApprovalState.PENDING], to,
            approved=approved, reason=None if approved else reason, decided_by=by,
        ):  # fmt: skip
            return False
        log.info("approval_answered", approval_id=approval_id, approved=approved, by=by)
        self._queue(await self.store.approvals.get(approval_id))
        return True

    async def waiting(self, limit: int) -> list[ApprovalRecord]:
        """Pending approvals, oldest first, at most `limit` (read through the
        index of open ones: a few per chat at most)."""
        pending = [r for r in await self.store.approvals.open() if r.state is ApprovalState.PENDING]
        return pending[:limit]

    def _may_answer(self, message: InboundMessage, record: ApprovalRecord) -> bool:
        if self.access is not None and self.access.is_admin_message(message):
            return True
        asker = record.message
        return message.channel == record.channel and bool(
            set(sender_ids(message)) & set(sender_ids(asker))
        )

    # -- internals -----------------------------------------------------------------
    def _index(self, record: ApprovalRecord) -> None:
        self._open.setdefault((record.channel, record.chat_id), set()).add(record.id)

    def _closed(self, channel: str, chat_id: str, approval_id: int) -> None:
        ids = self._open.get((channel, chat_id))
        if ids is not None:
            ids.discard(approval_id)
            if not ids:
                del self._open[(channel, chat_id)]

    def _queue(self, record: ApprovalRecord | None) -> None:
        """Into its conversation's queue: the turn that settles it and carries on."""
        if record is None or self.dispatch is None:
            return
        item = WorkItem(
            record.inbox_ids[0] if record.inbox_ids else 0,
            record.message,
            resume=True,
            session_id=record.session_id,
            approval_id=record.id,
        )
        try:
            self.dispatch(item)
        except RuntimeError:  # stopping: the next start takes it up again
            log.info("approval_resume_deferred", approval_id=record.id)
