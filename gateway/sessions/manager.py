"""SessionManager: one turn at a time per conversation, conversations concurrent.

Each conversation (channel, chat_id) with work gets a worker task in the
gateway's TaskGroup; the worker exits when its queue is empty, so idle chats
cost nothing. `RunSlots` (gateway.turns.run_slots) caps concurrent turns and the
sub-agents they run. Messages arriving
during a turn wait in the conversation's bounded queue: in `collect` mode the
next turn takes them all at once, in `followup` mode one by one; in `steer`
mode (and for `/steer TEXT` in any mode) they also ask the running turn to end
at its next safe boundary (agent.turn_control), and the next turn takes them.
`ConversationGates` holds a conversation between turns for whoever must
change it without a turn running (compaction).

A turn that storage failed (`StorageUnavailable`: the database busy, full,
failing) is not lost until a restart: its conversation waits, backing off
(`StorageRetry`), until a probe write passes, then runs it again from its
inbox rows as a restart would (`StorageRetry.reload`: rows already answered
are dropped, started ones resume), before the chat's later messages.

With several workers on one database (docs/scale-out.md) each turn runs fenced
by its chat's lease (`fence_of`, storage.fence): a write refused because
another worker took the chat over (`FenceLost`) ends the chat here: its batch
and queue go to `on_lease_lost`, which hands them to the chat's new holder.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import structlog

from gateway.config.core import QueueMode
from gateway.lifecycle import ShutdownBudget
from gateway.turns.execution import ExecutionService
from gateway.turns.run_slots import RunSlots
from gateway.work import TurnOutcome, WorkItem
from storage.database import STORAGE_ERRORS
from storage.errors import FenceLost, StorageUnavailable
from storage.fence import Fence, fenced

__all__ = ["ConversationGates", "SessionManager", "StorageRetry"]

log = structlog.get_logger(__name__)

ConversationKey = tuple[str, str]
TurnDone = Callable[[Sequence[WorkItem], TurnOutcome | None], None]
LeaseLost = Callable[[ConversationKey, list[WorkItem]], None]


@dataclass(frozen=True, slots=True)
class StorageRetry:
    """How a turn that storage failed is run again. `writable`: a probe write
    (True once writes pass); `reload`: the items still to run for a batch's
    inbox rows, read back as a restart reads them (none if already answered)."""

    writable: Callable[[], Awaitable[bool]]
    reload: Callable[[Sequence[WorkItem]], Awaitable[list[WorkItem]]]
    first_delay_secs: float = 0.5
    max_delay_secs: float = 30.0


class ConversationGates:
    """One lock per conversation, kept only while someone holds or waits for it."""

    def __init__(self) -> None:
        self._gates: dict[ConversationKey, tuple[asyncio.Lock, int]] = {}

    @asynccontextmanager
    async def hold(self, key: ConversationKey) -> AsyncIterator[None]:
        lock, users = self._gates.get(key) or (asyncio.Lock(), 0)
        self._gates[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._gates[key]
            if users == 1:
                del self._gates[key]
            else:
                self._gates[key] = (lock, users - 1)

    def __len__(self) -> int:
        return len(self._gates)


@dataclass(slots=True)
class _Conversation:
    key: ConversationKey
    pending: deque[WorkItem] = field(default_factory=deque)
    worker: asyncio.Task[None] | None = None
    turn: asyncio.Task[TurnOutcome] | None = None
    stop_requested: bool = False
    steer_requested: bool = False
    retry: list[WorkItem] = field(default_factory=list)  # a batch storage failed: it runs first
    retry_delay: float = 0.0  # the next backoff while storage keeps failing


class SessionManager:
    def __init__(
        self,
        execution: ExecutionService,
        gates: ConversationGates,
        *,
        slots: RunSlots,
        queue_mode: QueueMode,
        max_pending: int,
        on_turn_done: TurnDone | None = None,
        budget: ShutdownBudget | None = None,
        storage_retry: StorageRetry | None = None,
    ) -> None:
        """`storage_retry`: None leaves a turn storage failed to the next start."""
        self.execution = execution
        self.gates = gates
        self.queue_mode = queue_mode
        self.max_pending = max_pending
        self.slots = slots
        self._conversations: dict[ConversationKey, _Conversation] = {}
        self._tg: asyncio.TaskGroup | None = None
        self._accepting = True
        self._idle = asyncio.Event()
        self._idle.set()
        self._stopping = asyncio.Event()
        self.on_turn_done = on_turn_done
        self.budget = budget or ShutdownBudget(30.0)
        self.storage_retry = storage_retry
        # several workers (gateway.cluster): the fence of a chat's turns, and
        # where a chat's items go once another worker took it over
        self.fence_of: Callable[[str, str], Fence | None] = lambda channel, chat_id: None
        self.on_lease_lost: LeaseLost | None = None

    name = "sessions"

    async def start(self, tg: asyncio.TaskGroup) -> None:
        """Conversation workers run in `tg` from now on."""
        self._tg = tg

    async def stop(self) -> None:
        await self.shutdown(self.budget.left())

    # -- observation ---------------------------------------------------------
    @property
    def active_conversations(self) -> int:
        return len(self._conversations)

    @property
    def running_turns(self) -> int:
        return sum(1 for c in self._conversations.values() if c.turn is not None)

    @property
    def pending_messages(self) -> int:
        return sum(len(c.pending) for c in self._conversations.values())

    @property
    def waiting_for_storage(self) -> int:
        """Conversations whose turn storage failed, waiting to run it again."""
        return sum(1 for c in self._conversations.values() if c.retry)

    def room(self, channel: str, chat_id: str) -> int:
        """How many more messages the conversation's queue takes now."""
        conv = self._conversations.get((channel, chat_id))
        return self.max_pending - (len(conv.pending) if conv is not None else 0)

    def is_busy(self, channel: str, chat_id: str) -> bool:
        conv = self._conversations.get((channel, chat_id))
        return conv is not None and conv.turn is not None

    # -- input ---------------------------------------------------------------
    def dispatch(self, item: WorkItem, *, force: bool = False) -> bool:
        """Queue `item` for its conversation; False when that queue is full
        (`force` skips the cap, for turns recovered after a restart)."""
        if not self._accepting or self._tg is None:
            raise RuntimeError("SessionManager is not accepting work")
        key = (item.message.channel, item.message.chat_id)
        conv = self._conversations.get(key)
        if conv is None:
            conv = self._conversations[key] = _Conversation(key)
        if len(conv.pending) >= self.max_pending and not force:
            return False
        conv.pending.append(item)
        if self.queue_mode is QueueMode.STEER and not item.resume:
            conv.steer_requested = conv.turn is not None
        if conv.worker is None:
            self._idle.clear()
            conv.worker = self._tg.create_task(
                self._work(conv), name=f"conversation:{key[0]}:{key[1]}"
            )
        return True

    def steer(self, item: WorkItem) -> bool:
        """Queue `item` and ask the running turn (if any) to end at its next
        safe boundary so that `item` takes over; False when the queue is full."""
        if not self.dispatch(item):
            return False
        conv = self._conversations[item.conversation]
        conv.steer_requested = conv.turn is not None
        return True

    def stop_turn(self, channel: str, chat_id: str) -> bool:
        """Cancel the conversation's running turn (/stop). False if none runs."""
        conv = self._conversations.get((channel, chat_id))
        if conv is None or conv.turn is None or conv.turn.done():
            return False
        conv.stop_requested = True
        conv.turn.cancel()
        return True

    # -- work ----------------------------------------------------------------
    def _take(self, conv: _Conversation) -> list[WorkItem]:
        if conv.retry:
            batch, conv.retry = conv.retry, []
            return batch
        first = conv.pending.popleft()
        batch = [first]
        if first.approval_id is not None:
            return batch  # it carries on from an answered approval, alone
        if first.resume:
            # a recovered turn covers every inbox row it had started
            while (
                conv.pending
                and conv.pending[0].resume
                and conv.pending[0].approval_id is None
                and conv.pending[0].session_id == first.session_id
            ):
                batch.append(conv.pending.popleft())
        elif self.queue_mode is not QueueMode.FOLLOWUP:
            while conv.pending and not conv.pending[0].resume:
                batch.append(conv.pending.popleft())
        return batch

    async def _work(self, conv: _Conversation) -> None:
        try:
            while (conv.retry or conv.pending) and self._accepting:
                batch = self._take(conv)
                outcome: TurnOutcome | None = None
                failed: StorageUnavailable | None = None
                async with self.slots.turn(), self.gates.hold(conv.key):
                    conv.stop_requested = conv.steer_requested = False
                    with fenced(self.fence_of(*conv.key)):  # the task copies the context
                        conv.turn = asyncio.create_task(
                            self.execution.run_turn(
                                batch,
                                stop_requested=lambda: conv.stop_requested,
                                steer_requested=lambda: conv.steer_requested,
                            ),
                            name=f"turn:{conv.key[0]}:{conv.key[1]}",
                        )
                    try:
                        outcome = await conv.turn
                    except asyncio.CancelledError:
                        task = asyncio.current_task()
                        if task is not None and task.cancelling():
                            raise  # the gateway is stopping
                        # the turn was stopped by /stop; the worker carries on
                    except FenceLost as exc:
                        self._give_up(conv, batch, exc)
                        break
                    except StorageUnavailable as exc:
                        failed = exc
                    except Exception:
                        log.exception("turn_crashed", conversation=conv.key)
                    finally:
                        conv.turn = None
                if failed is not None and self.storage_retry is not None:
                    await self._retry_later(conv, batch, failed, self.storage_retry)
                    continue  # its rows are still open: nobody is told it is done
                if failed is not None:
                    log.error("turn_crashed", conversation=conv.key, reason=failed.reason)
                conv.retry_delay = 0.0
                if self.on_turn_done is not None:
                    try:
                        self.on_turn_done(batch, outcome)
                    except Exception:
                        log.exception("turn_done_hook_failed")
        finally:
            conv.worker = None
            if not conv.pending or not self._accepting:
                self._conversations.pop(conv.key, None)
            if not any(c.worker for c in self._conversations.values()):
                self._idle.set()

    def _give_up(self, conv: _Conversation, batch: list[WorkItem], lost: FenceLost) -> None:
        """Another worker holds the chat now: nothing of this turn's last write
        was committed; its items and the queue's go to the new holder."""
        items = batch + list(conv.pending)
        conv.pending.clear()
        conv.retry = []
        log.warning(
            "fence_refused", chat=conv.key[1], channel=conv.key[0], lease=lost.key, items=len(items)
        )
        if self.on_lease_lost is not None:
            self.on_lease_lost(conv.key, items)

    async def _retry_later(
        self,
        conv: _Conversation,
        batch: list[WorkItem],
        failed: StorageUnavailable,
        retry: StorageRetry,
    ) -> None:
        """Back off until storage takes a write, then set `batch` (read back
        from its inbox rows) to run next. Returns at once when the gateway
        stops: the rows stay open and the next start runs them."""
        reason = failed.reason
        while self._accepting:
            delay = conv.retry_delay = min(
                max(conv.retry_delay * 2, retry.first_delay_secs), retry.max_delay_secs
            )
            conv.retry = batch  # counted as waiting; run first if the worker stops here
            log.warning(
                "turn_waiting_for_storage",
                conversation=conv.key,
                reason=reason,
                retry_in_secs=delay,
                inbox_ids=[item.inbox_id for item in batch],
            )
            try:
                async with asyncio.timeout(delay):
                    await self._stopping.wait()
                return  # stopping
            except TimeoutError:
                pass
            try:
                if await retry.writable():
                    conv.retry = await retry.reload(batch)
                    log.info("turn_retrying", conversation=conv.key, rows=len(conv.retry))
                    return
            except STORAGE_ERRORS as exc:
                reason = str(exc)
            except Exception:  # the rows stay open: the next start runs them
                log.exception("turn_crashed", conversation=conv.key)
                conv.retry = []
                return

    # -- shutdown ------------------------------------------------------------
    async def shutdown(self, grace_secs: float) -> None:
        """Start no new turns; let running ones finish within `grace_secs`, then
        cancel them (they stay `started` in the inbox and resume at next start)."""
        self._accepting = False
        self._stopping.set()
        try:
            async with asyncio.timeout(grace_secs):
                await self._idle.wait()
        except TimeoutError:
            workers = [c.worker for c in self._conversations.values() if c.worker is not None]
            log.warning("shutdown_cancelling_turns", turns=len(workers))
            for worker in workers:
                worker.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
