"""`Handover`: the inbox across several workers (docs/scale-out.md).

Every message, whatever brought it (recorded here, a redelivery of one
recorded before, a sweep of a dead worker's chats, a forward from another
worker, a turn that lost its chat), goes through `place`:

- a chat another live worker holds is named to it by notification, and this
  worker is done with its messages (a scheduled run's waiter is told,
  `on_forwarded`);
- a chat this worker holds (or takes now: free, or its holder dead) has its
  unfinished rows read from the inbox, in id order, and each row not yet
  queued here is judged by the access gate (here, on the holder, its writes
  fenced by the chat's lease) and routed. So a chat's rows run in the order
  they were recorded, whichever worker recorded them and whatever happened to
  the notification or the worker in between: a row stranded by a worker that
  died between its commit and its forward runs before the next one.

What reaches this worker from outside runs in one task through a bounded
queue: chats named by other workers; at every heartbeat, the chats dead
workers left (taken over) and this worker's own chats with rows not queued
(a notification lost while the listener reconnected); items of a chat whose
turn found its lease taken over (FenceLost), placed again. A row is queued at
most once per worker (`ChatLeases.first_routing`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

import structlog

from gateway.bus import InboundMessage
from gateway.cluster.chats import ChatLeases
from gateway.lifecycle import cancel_and_wait
from gateway.work import WorkItem
from storage.database import STORAGE_ERRORS
from storage.fence import fenced
from storage.sql.delivery.inbox import InboxEntry
from storage.units.cluster import ClusterStore

__all__ = ["Handover"]

log = structlog.get_logger(__name__)

Chat = tuple[str, str]

_JOBS_MAX: Final = 1024
_UNLEASED_GRACE_SECS: Final = 2.0


@dataclass(frozen=True, slots=True)
class _Job:
    kind: Literal["chats", "beat", "mine", "again"]
    chats: tuple[Chat, ...] = ()
    items: tuple[WorkItem, ...] = ()


class Handover:
    name = "handover"

    def __init__(
        self,
        chats: ChatLeases,
        item_of: Callable[[InboxEntry], WorkItem],
        admit: Callable[[list[WorkItem]], Awaitable[list[WorkItem]]],
        route_here: Callable[[WorkItem], Awaitable[None]],
    ) -> None:
        """`item_of`: a recovered row as a work item; `admit`: the access
        gate's verdict (the refused are closed); `route_here`: to this
        worker's session or command lane."""
        self.chats = chats
        self.item_of = item_of
        self.admit = admit
        self.route_here = route_here
        self.on_forwarded: Callable[[Sequence[WorkItem]], None] = lambda items: None
        self._jobs: asyncio.Queue[_Job] = asyncio.Queue(_JOBS_MAX)
        self._beat_queued = False
        self._task: asyncio.Task[None] | None = None
        worker = chats.worker
        worker.subscribers.on_work.append(lambda named: self._put(_Job("chats", tuple(named))))
        worker.subscribers.on_beat.append(self._beat_soon)
        worker.subscribers.on_listening.append(lambda: self._put(_Job("mine")))
        worker.subscribers.on_lost.append(self._lost)

    @property
    def store(self) -> ClusterStore:
        return self.chats.worker.store.cluster

    # -- placing -----------------------------------------------------------------
    async def place(
        self, items: Sequence[WorkItem], *, judged: bool, chats: Sequence[Chat] = ()
    ) -> int:
        """Route `items` (and the unfinished rows of `chats`) where their chat
        is held; how many rows were queued here. `judged`: the items passed
        the access gate already."""
        by_chat: dict[Chat, list[WorkItem]] = {chat: [] for chat in chats}
        for item in items:
            by_chat.setdefault(item.conversation, []).append(item)
        if not by_chat:
            return 0
        try:
            await self.chats.prepare(by_chat)
            here: list[Chat] = []
            elsewhere: list[Chat] = []
            for chat in by_chat:
                if await self.chats.owner_of(*chat) is None:
                    here.append(chat)
                else:
                    elsewhere.append(chat)
            if elsewhere:
                await self.chats.forward(elsewhere)
            entries = await self.store.unfinished_of_chats(here) if here else []
        except STORAGE_ERRORS as exc:  # the rows stay unfinished: a beat finds them
            log.warning("handover_deferred", chats=len(by_chat), error=type(exc).__name__)
            return 0
        for chat in elsewhere:
            self._handed_over(by_chat[chat])
        incoming = {item.inbox_id: item for item in items}
        placed = 0
        rows: dict[Chat, list[InboxEntry]] = {chat: [] for chat in here}
        for entry in entries:
            rows[(entry.message.channel, entry.message.chat_id)].append(entry)
        for chat in here:
            passed = {i.inbox_id for i in by_chat[chat]} if judged else set()
            todo = [
                incoming.get(e.id) or self.item_of(e)
                for e in rows[chat]
                # a judged item comes back from here (a message kept for later)
                if self.chats.first_routing(e.id) or e.id in passed
            ]
            await self._run_here(chat, todo, passed)
            placed += len(todo)
        return placed

    async def _run_here(self, chat: Chat, todo: list[WorkItem], passed: set[int]) -> None:
        fresh = [i for i in todo if not i.resume and i.inbox_id not in passed]
        admitted: set[int] = set()
        if fresh:
            with fenced(self.chats.fence(*chat)):  # a refusal is the holder's write too
                admitted = {i.inbox_id for i in await self.admit(fresh)}
        for item in todo:
            if item.resume or item.inbox_id in passed or item.inbox_id in admitted:
                await self.route_here(item)
                continue
            # refused (closed), kept for later (limits.over_rate "later": its
            # release routes it), or not judged because the gate failed: left
            # as a single gateway leaves it, to the next start or holder
            if item.trace is not None:
                item.trace.done()

    def _handed_over(self, items: Sequence[WorkItem]) -> None:
        for item in items:
            if item.trace is not None:
                item.trace.done()
        if items:
            self.on_forwarded(items)

    async def redelivered(self, messages: Sequence[InboundMessage]) -> None:
        """Messages the inbox had already: if one is still unfinished (its
        worker may have died before routing it), its chat is looked at again."""
        try:
            found = await self.store.unfinished_duplicates(messages)
        except STORAGE_ERRORS as exc:
            log.warning("handover_deferred", chats=len(messages), error=type(exc).__name__)
            return
        chats = {(m.channel, m.chat_id) for m, row in zip(messages, found, strict=True) if row}
        if chats:
            await self.place([], judged=False, chats=sorted(chats))

    def lease_lost(self, key: Chat, items: list[WorkItem]) -> None:
        """A turn of chat `key` found its lease taken over (SessionManager)."""
        self.chats.drop(*key)
        self.chats.release_rows(i.inbox_id for i in items)
        self._put(_Job("again", items=tuple(items)))

    def _lost(self, keys: list[str]) -> None:
        """The heartbeat found chats taken over: their turns here cannot commit
        (the fence); their queued items go to the new holder when they fail."""
        if chats := self.chats.lost(keys):
            log.warning("chats_lost", count=len(chats))

    # -- lifecycle ---------------------------------------------------------------
    async def start(self, tg: asyncio.TaskGroup) -> None:
        self._task = tg.create_task(self._run(), name="handover")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task])

    async def sweep(self) -> int:
        """Take over the chats dead workers left with unfinished rows and place
        them; how many rows were queued here."""
        # a row nobody took yet is left a moment to the worker that recorded it
        grace = min(_UNLEASED_GRACE_SECS, self.chats.worker.lease_secs)
        orphans = await self.store.orphaned_chats(older_than_secs=grace)
        if not orphans:
            return 0
        taken = await self.chats.take_orphans(orphans)
        if not taken:
            return 0
        placed = await self.place([], judged=False, chats=taken)
        log.info("chats_taken_over", chats=len(taken), rows=placed)
        return placed

    async def mine(self) -> None:
        """This worker's chats with unfinished rows it has not queued."""
        keys = await self.store.unfinished_keys()
        chats = sorted(
            {
                (channel, chat_id)
                for inbox_id, channel, chat_id in keys
                if not self.chats.queued(inbox_id) and self.chats.mine(channel, chat_id)
            }
        )
        if chats:
            await self.place([], judged=False, chats=chats)

    # -- the jobs ------------------------------------------------------------------
    def _put(self, job: _Job) -> None:
        try:
            self._jobs.put_nowait(job)
        except asyncio.QueueFull:  # the rows stay unfinished: a later beat finds them
            log.warning("handover_queue_full", kind=job.kind)

    def _beat_soon(self) -> None:
        if not self._beat_queued:
            self._beat_queued = True
            self._put(_Job("beat"))

    async def _run(self) -> None:
        while True:
            job = await self._jobs.get()
            try:
                await self._do(job)
            except asyncio.CancelledError:
                raise
            except Exception:  # the rows stay unfinished; the next beat looks again
                log.exception("handover_failed", kind=job.kind)

    async def _do(self, job: _Job) -> None:
        if job.kind == "beat":
            self._beat_queued = False
            await self.sweep()
            await self.mine()
        elif job.kind == "mine":
            await self.mine()
        elif job.kind == "chats":
            await self.place([], judged=False, chats=[c for c in job.chats if self.chats.mine(*c)])
        else:
            await self.place(job.items, judged=True)
