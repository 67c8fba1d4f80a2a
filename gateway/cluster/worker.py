"""`ClusterWorker`: this process as one worker of the deployment (docs/scale-out.md).

- Identity: `<name>/<pid>-<4 hex>`, new per start; the name is
  `cluster.worker_name` or `<host name>:<gateway.port>`. Bound as `worker=` on
  every log line.
- At start it registers its row and expires the rows of this host's earlier
  workers of the same name whose processes are gone (a crash and a restart:
  their leases move at once instead of after `lease_secs`).
- A heartbeat every `lease_secs / 3` renews the row, and so every lease this
  worker holds (storage.sql.cluster). It compares the leases the database says
  it holds with the ones it thinks it holds: a lease gone (it lapsed while this
  process was paused or cut off, and another worker took it) is reported to
  `on_lost`. Each beat also asks `on_beat` to look for work of dead workers.
- It listens on the database's notifications (`picobot`): work forwarded to
  it, outbox rows committed elsewhere, a worker leaving; each goes to its
  subscriber. After every (re)connect `on_listening` runs, since anything
  sent meanwhile was lost.
- A clean stop deletes its leases and its row and tells the others, who take
  over at once.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
import structlog

from gateway.lifecycle import cancel_and_wait
from storage.database import STORAGE_ERRORS
from storage.sql.cluster import WorkerForgotten
from storage.store import Store

__all__ = ["ClusterWorker", "Subscribers", "WorkerIdentity"]

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class WorkerIdentity:
    id: str
    name: str
    host: str
    pid: int

    @classmethod
    def new(cls, name: str, port: int) -> WorkerIdentity:
        host = socket.gethostname()
        name = name or f"{host}:{port}"
        pid = os.getpid()
        return cls(f"{name}/{pid}-{secrets.token_hex(2)}", name, host, pid)


@dataclass(slots=True)
class Subscribers:
    """What the rest of the gateway does when the cluster says something.
    Each is called on the event loop and must not block."""

    # chats whose unfinished rows their holder should look at (channel, chat id)
    on_work: list[Callable[[list[tuple[str, str]]], None]] = field(default_factory=list)
    # (channel, chat id or None, the id of a row sent to the recipients connected there)
    on_outbox: list[Callable[[str, str | None, int | None], None]] = field(default_factory=list)
    on_lost: list[Callable[[list[str]], None]] = field(default_factory=list)  # leases taken from us
    on_beat: list[Callable[[], None]] = field(default_factory=list)  # look for dead workers' work
    # after each (re)connect of the listener: notifications may have been missed
    on_listening: list[Callable[[], None]] = field(default_factory=list)


class ClusterWorker:
    name = "cluster"

    def __init__(
        self,
        store: Store,
        identity: WorkerIdentity,
        lease_secs: float,
        address: Callable[[], str],
    ) -> None:
        self.store = store
        self.identity = identity
        self.lease_secs = lease_secs
        self.address = address
        self.subscribers = Subscribers()
        self.held: dict[str, int] = {}  # lease key → token, as of the last beat or take
        self.beats = 0
        self.lapses = 0
        # no other live worker as of the last beat (or a worker said it joined
        # since): what only other workers' recipients would want is not sent
        self.alone = False
        self._tasks: list[asyncio.Task[None]] = []
        self._wake = asyncio.Event()
        self._registered = False

    @property
    def id(self) -> str:
        return self.identity.id

    @property
    def interval(self) -> float:
        return self.lease_secs / 3

    # -- lifecycle ------------------------------------------------------------
    async def start(self, tg: asyncio.TaskGroup) -> None:
        await self._register()
        self._tasks = [
            tg.create_task(self._beat_loop(), name="cluster-heartbeat"),
            tg.create_task(self._listen(), name="cluster-listen"),
        ]

    async def stop(self) -> None:
        await cancel_and_wait(self._tasks)
        if not self._registered:
            return
        try:
            released = await self.store.cluster.leave(self.id)
            await self.notify({"k": "released", "from": self.id})
        except STORAGE_ERRORS as exc:  # they expire after lease_secs instead
            log.warning("worker_handover_failed", error=type(exc).__name__)
            return
        self.held.clear()
        log.info("worker_left", released=released)

    async def _register(self) -> None:
        me = self.identity
        await self.store.cluster.register(
            me.id, name=me.name, host=me.host, pid=me.pid, address=self.address(),
            lease_secs=self.lease_secs,
        )  # fmt: skip
        self._registered = True
        await self.notify({"k": "joined"})
        pids = await self.store.cluster.same_name_pids(me.id, me.name, me.host)
        # our own pid is a predecessor's only in a restarted container (pid 1 again)
        gone = [pid for pid in pids if pid == me.pid or not _running(pid)]
        if gone and await self.store.cluster.expire_predecessors(
            me.id, name=me.name, host=me.host, gone=gone
        ):
            log.info("worker_predecessor_expired", pids=gone)
        log.info("worker_started", name=me.name, lease_secs=self.lease_secs)

    # -- leases -----------------------------------------------------------------
    def took(self, key: str, token: int) -> None:
        self.held[key] = token

    def let_go(self, key: str) -> None:
        self.held.pop(key, None)

    def beat_now(self) -> None:
        """Beat (and look for dead workers' work) without waiting for the interval."""
        self._wake.set()

    async def _beat_loop(self) -> None:
        while True:
            try:
                async with asyncio.timeout(self.interval):
                    await self._wake.wait()
            except TimeoutError:
                pass
            self._wake.clear()
            try:
                await self._beat()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the leases lapse if this goes on: the fences hold
                log.warning("worker_heartbeat_failed", error=type(exc).__name__)

    async def _beat(self) -> None:
        before = dict(self.held)  # what is taken or let go meanwhile is not this beat's
        try:
            beat = await self.store.cluster.heartbeat(self.id, self.lease_secs)
        except WorkerForgotten:
            log.warning("worker_forgotten")  # presumed dead long ago: come back as new
            await self._register()
            beat = await self.store.cluster.heartbeat(self.id, self.lease_secs)
        self.beats += 1
        self.alone = beat.others == 0
        if beat.lapsed:
            self.lapses += 1
            log.warning("worker_lapsed")  # paused or cut off past lease_secs
        lost = [k for k, token in before.items() if beat.held.get(k) != token]
        for key in lost:
            if self.held.get(key) == before[key]:
                del self.held[key]
        if lost:
            log.warning("lease_lost", leases=lost[:20], count=len(lost))
            for hook in self.subscribers.on_lost:
                hook(lost)
        for beat_hook in self.subscribers.on_beat:
            beat_hook()

    # -- notifications ------------------------------------------------------------
    async def notify(self, message: dict[str, Any]) -> None:
        await self.store.cluster.notify(orjson.dumps({**message, "from": self.id}).decode())

    async def _listen(self) -> None:
        def listening() -> None:
            for hook in self.subscribers.on_listening:
                hook()

        await self.store.cluster.listen(self._heard, listening)

    def _heard(self, payload: str) -> None:
        try:
            message = orjson.loads(payload)
            kind, sender = message["k"], message.get("from")
            chats = [(str(c[0]), str(c[1])) for c in message.get("chats", ())]
            sent = int(message["sent"]) if message.get("sent") is not None else None
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, IndexError):
            log.warning("cluster_notification_unreadable", size=len(payload))
            return
        if sender == self.id:  # our own, heard back
            return
        if kind == "work":
            for work_hook in self.subscribers.on_work:
                work_hook(chats)
        elif kind == "outbox":
            chat = message.get("chat")
            for outbox_hook in self.subscribers.on_outbox:
                outbox_hook(str(message.get("ch")), chat if isinstance(chat, str) else None, sent)
        elif kind == "released":
            self.beat_now()
        elif kind == "joined":
            self.alone = False

    def details(self) -> dict[str, Any]:
        """For /ready: who this worker is and what it holds."""
        channels = sorted(k.split(":", 1)[1] for k in self.held if k.startswith("channel:"))
        chats = sum(1 for k in self.held if k.startswith("chat:"))
        return {
            "id": self.id,
            "name": self.identity.name,
            "leases": {"channels": channels, "chats": chats},
        }


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
