"""`ChatLeases`: which worker runs a chat's turns (docs/scale-out.md).

A chat's turns run on the worker holding `chat:<channel>:<chat_id>`. The
worker that recorded a message asks `owner_of`: a lease it holds, or one free
or held by a dead worker (taken now, one write for a whole batch through
`prepare`), makes the chat its own; otherwise the live holder is named and the
chat is named to it by notification (`forward`), and it reads the chat's
unfinished rows itself. Another
worker's ownership is remembered for `lease_secs`: a message forwarded to a
holder that has died meanwhile stays unfinished in the inbox, and the sweep of
dead workers' chats (`take_orphans`) hands it to whoever takes the chat.

`fence` is what a turn carries (storage.fence): every write it makes checks
the lease's token. `first_routing` keeps one worker from queueing the same
inbox row twice when it reaches it both ways (recorded here and found by a
sweep, say); `release_rows` forgets rows whose turn gave up.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence

import structlog

from gateway.cluster.worker import ClusterWorker
from storage.errors import StorageUnavailable
from storage.fence import Fence
from storage.sql.cluster import CHAT_PREFIX, chat_key

__all__ = ["ChatLeases"]

log = structlog.get_logger(__name__)

Chat = tuple[str, str]  # (channel, chat id)

_ROUTED_MAX = 65536  # inbox ids remembered as queued here (a bounded memory)
_FORWARD_BATCH = 40  # chats per notification: well under PostgreSQL's 8000-byte payload


class ChatLeases:
    def __init__(self, worker: ClusterWorker) -> None:
        self.worker = worker
        self._others: dict[str, tuple[str, float]] = {}  # key → (owner, until, monotonic)
        self._routed: OrderedDict[int, None] = OrderedDict()
        self.forwarded = 0
        self.taken = 0

    # -- who runs a chat --------------------------------------------------------
    def mine(self, channel: str, chat_id: str) -> bool:
        return chat_key(channel, chat_id) in self.worker.held

    async def prepare(self, chats: Iterable[Chat]) -> None:
        """Take in one write every chat of `chats` this worker does not know a
        live holder of (free or dead ones become this worker's)."""
        now = time.monotonic()
        keys = sorted(
            {
                key
                for key in (chat_key(*c) for c in chats)
                if key not in self.worker.held and self._others.get(key, ("", 0.0))[1] <= now
            }
        )
        if keys:
            await self._acquire(keys)

    async def owner_of(self, channel: str, chat_id: str) -> str | None:
        """None when this worker runs the chat's turns; else the id of the
        live worker that does (as of at most `lease_secs` ago)."""
        key = chat_key(channel, chat_id)
        if key in self.worker.held:
            return None
        other = self._others.get(key)
        if other is not None and other[1] > time.monotonic():
            return other[0]
        await self._acquire([key])
        if key in self.worker.held:
            return None
        other = self._others.get(key)
        if other is None:  # let go between two statements: the next look finds it
            raise StorageUnavailable(f"lease {key} changed hands while it was taken")
        return other[0]

    async def take_orphans(self, chats: Sequence[Chat]) -> list[Chat]:
        """Take the leases of `chats` (found with no live holder); the ones
        this worker got."""
        keys = [chat_key(*c) for c in chats]
        for key in keys:
            self._others.pop(key, None)
        await self._acquire(keys, orphans=True)
        return [c for c, key in zip(chats, keys, strict=True) if key in self.worker.held]

    async def _acquire(self, keys: list[str], *, orphans: bool = False) -> None:
        worker = self.worker
        holders = await worker.store.cluster.acquire(worker.id, keys)
        until = time.monotonic() + worker.lease_secs
        for key in keys:
            holder = holders.get(key)
            if holder is None:  # deleted between the two statements: try again next time
                continue
            if holder.owner == worker.id:
                if worker.held.get(key) != holder.token:
                    if holder.token > 1 or orphans:
                        self.taken += 1
                        log.info("chat_lease_taken", lease=key, token=holder.token)
                    worker.took(key, holder.token)
                self._others.pop(key, None)
            else:
                worker.let_go(key)
                self._others[key] = (holder.owner, until)

    def lost(self, keys: Iterable[str]) -> list[Chat]:
        """Forget leases the heartbeat found taken over; the chats they were."""
        chats = []
        for key in keys:
            if key.startswith(CHAT_PREFIX):
                self.worker.let_go(key)
                channel, _, chat_id = key[len(CHAT_PREFIX) :].partition(":")
                chats.append((channel, chat_id))
        return chats

    def drop(self, channel: str, chat_id: str) -> None:
        """This worker's write for the chat was refused: it is not ours any more."""
        self.worker.let_go(chat_key(channel, chat_id))

    def fence(self, channel: str, chat_id: str) -> Fence | None:
        """What a turn of the chat carries. A chat this worker does not hold
        gets a fence no write passes (token 0): its turn cannot commit."""
        key = chat_key(channel, chat_id)
        return Fence(key, self.worker.id, self.worker.held.get(key, 0))

    # -- forwarding ---------------------------------------------------------------
    async def forward(self, chats: Sequence[Chat]) -> None:
        """Tell whoever holds `chats` now to look at their unfinished rows. By
        chat, not by worker: a holder that changed since this worker last
        looked is the one that hears it."""
        for start in range(0, len(chats), _FORWARD_BATCH):
            part = [list(c) for c in chats[start : start + _FORWARD_BATCH]]
            await self.worker.notify({"k": "work", "chats": part})
        self.forwarded += len(chats)

    def first_routing(self, inbox_id: int) -> bool:
        """Whether this is the first time this worker queues the row."""
        if inbox_id in self._routed:
            return False
        self._routed[inbox_id] = None
        if len(self._routed) > _ROUTED_MAX:
            self._routed.popitem(last=False)
        return True

    def queued(self, inbox_id: int) -> bool:
        """Whether this worker has queued the row already."""
        return inbox_id in self._routed

    def release_rows(self, inbox_ids: Iterable[int]) -> None:
        for inbox_id in inbox_ids:
            self._routed.pop(inbox_id, None)

    def held_chats(self) -> list[Chat]:
        chats = []
        for key in self.worker.held:
            if key.startswith(CHAT_PREFIX):
                channel, _, chat_id = key[len(CHAT_PREFIX) :].partition(":")
                chats.append((channel, chat_id))
        return chats
