"""A turn that storage failed (gateway.sessions.manager): its conversation backs off
until a probe write passes, then runs it again from its inbox rows, before
the chat's later messages; other chats go on; shutdown does not wait for it.
And an inbox write storage refused is not taken for a poison message."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

from gateway.bus import InboundMessage
from gateway.commands import CommandRegistry
from gateway.config.core import QueueMode
from gateway.ingress.dead_letters import DeadLetterSink
from gateway.ingress.inbound import InboundProcessor
from gateway.ops.metrics import Metrics
from gateway.sessions.manager import ConversationGates, SessionManager, StorageRetry
from gateway.turns.run_slots import RunSlots
from gateway.work import TurnOutcome, WorkItem
from storage.sqlite.db import Database, StorageUnavailable
from storage.store import Store
from tests.support import wait_until


def _item(inbox_id: int, chat: str = "c1") -> WorkItem:
    return WorkItem(inbox_id, InboundMessage("test", chat, "u1", f"m{inbox_id}", str(inbox_id)))


class FakeExecution:
    """Runs turns by inbox ids; the turns of `failing` ids raise as storage would."""

    def __init__(self) -> None:
        self.failing: set[int] = set()
        self.runs: list[list[tuple[int, bool]]] = []  # (inbox id, resume) per turn
        self.changed = asyncio.Condition()

    async def run_turn(
        self,
        items: Sequence[WorkItem],
        *,
        stop_requested: Callable[[], bool],
        steer_requested: Callable[[], bool] | None = None,
    ) -> TurnOutcome:
        async with self.changed:
            self.runs.append([(i.inbox_id, i.resume) for i in items])
            self.changed.notify_all()
        if self.failing & {i.inbox_id for i in items}:
            raise StorageUnavailable("database is locked")
        return TurnOutcome(ok=True)

    async def wait_runs(self, count: int) -> None:
        async with asyncio.timeout(10), self.changed:
            await self.changed.wait_for(lambda: len(self.runs) >= count)


class FakeStorage:
    """The probe and the inbox as a restart would read them back."""

    def __init__(self) -> None:
        self.writable = False
        self.probes = 0
        self.probed = asyncio.Event()
        self.answered: set[int] = set()  # inbox rows already done

    async def probe(self) -> bool:
        self.probes += 1
        self.probed.set()
        return self.writable

    async def reload(self, batch: Sequence[WorkItem]) -> list[WorkItem]:
        return [
            WorkItem(i.inbox_id, i.message, resume=True, session_id="s")
            for i in batch
            if i.inbox_id not in self.answered
        ]


def _manager(
    execution: FakeExecution, storage: FakeStorage, done: list[list[int]]
) -> SessionManager:
    return SessionManager(
        execution,  # type: ignore[arg-type]
        ConversationGates(),
        slots=RunSlots(4, 4),
        queue_mode=QueueMode.FOLLOWUP,
        max_pending=10,
        on_turn_done=lambda batch, _outcome: done.append([i.inbox_id for i in batch]),
        storage_retry=StorageRetry(
            storage.probe, storage.reload, first_delay_secs=0.01, max_delay_secs=0.02
        ),
    )


async def test_a_turn_storage_failed_runs_again_first_once_writes_pass() -> None:
    execution, storage, done = FakeExecution(), FakeStorage(), []
    sessions = _manager(execution, storage, done)
    async with asyncio.TaskGroup() as tg:
        await sessions.start(tg)
        execution.failing = {1}
        sessions.dispatch(_item(1))
        sessions.dispatch(_item(2))  # behind it in the same chat
        await execution.wait_runs(1)
        sessions.dispatch(_item(10, chat="c2"))  # another chat is not held up
        await execution.wait_runs(2)
        for _ in range(2):
            storage.probed.clear()
            await storage.probed.wait()
        assert storage.probes >= 2  # backing off, the probe keeps failing
        assert sessions.waiting_for_storage == 1
        assert [r for r in execution.runs if r[0][0] != 10] == [[(1, False)]]

        execution.failing = set()
        storage.writable = True
        await execution.wait_runs(4)
        await sessions.shutdown(5)
    assert execution.runs == [[(1, False)], [(10, False)], [(1, True)], [(2, False)]]
    assert done == [[10], [1], [2]]  # the failed attempt was not reported as done


async def test_a_batch_answered_meanwhile_is_not_run_again() -> None:
    """Guarantee 2: a row whose reply is stored (done) is dropped on reload."""
    execution, storage, done = FakeExecution(), FakeStorage(), []
    sessions = _manager(execution, storage, done)
    async with asyncio.TaskGroup() as tg:
        await sessions.start(tg)
        execution.failing = {1}
        sessions.dispatch(_item(1))
        sessions.dispatch(_item(2))
        await execution.wait_runs(1)
        storage.answered = {1}
        storage.writable = True
        await execution.wait_runs(2)
        await sessions.shutdown(5)
    assert execution.runs == [[(1, False)], [(2, False)]]
    assert storage.probes == 1  # it waited for storage, then found the row answered


async def test_shutdown_does_not_wait_out_the_backoff() -> None:
    execution, storage = FakeExecution(), FakeStorage()
    sessions = SessionManager(
        execution,  # type: ignore[arg-type]
        ConversationGates(),
        slots=RunSlots(4, 4),
        queue_mode=QueueMode.FOLLOWUP,
        max_pending=10,
        storage_retry=StorageRetry(storage.probe, storage.reload, first_delay_secs=3600),
    )
    async with asyncio.TaskGroup() as tg:
        await sessions.start(tg)
        execution.failing = {1}
        sessions.dispatch(_item(1))
        await execution.wait_runs(1)
        await wait_until(lambda: sessions.waiting_for_storage, 5)  # the worker backs off
        async with asyncio.timeout(5):
            await sessions.shutdown(3600)  # returns: the waiting worker ended at once
    assert storage.probes == 0
    assert sessions.active_conversations == 0


class FullInboxStore(Store):
    """The inbox refuses every job as a full disk does (the rest still writes)."""

    async def record_inbound(self, batch: Sequence[InboundMessage]) -> list[int | Exception | None]:
        return [StorageUnavailable("database or disk is full") for _ in batch]


async def test_an_inbox_write_storage_refused_is_not_acked_nor_dead_lettered(
    tmp_path: Path,
) -> None:
    """Not the message's fault: the channel must not ack it (it is offered
    again), and it is not set aside as a dead letter as a poison message is."""
    async with Database(tmp_path / "db.sqlite") as db:
        store = FullInboxStore(db)
        processor = InboundProcessor(
            cast(Any, None),  # the bus: _process is fed directly
            store,
            cast(Any, None),  # no session is reached: nothing is accepted
            CommandRegistry(),
            lambda channel: None,
            dead_letters=DeadLetterSink(store, Metrics()),
        )
        message = InboundMessage("telegram", "42", "42", "hello", "42:7")
        message.receipt = asyncio.get_running_loop().create_future()
        await processor._process([message])
        assert isinstance(message.receipt.exception(), StorageUnavailable)
        assert await store.dead_letters(10) == []
