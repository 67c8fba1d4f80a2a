"""`ClusterStore`: the units of work of several workers on one database
(`Store.cluster`, storage.sql.cluster, docs/scale-out.md)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

from gateway.bus import InboundMessage
from storage.database import Connection, Database
from storage.sql import cluster
from storage.sql.cluster import Heartbeat, LeaseHolder, WorkerRow
from storage.sql.delivery import inbox, outbox
from storage.sql.delivery.inbox import InboxEntry
from storage.sql.delivery.outbox import OutboxRow

__all__ = ["NOTIFY_CHANNEL", "ClusterStore"]

NOTIFY_CHANNEL = "picobot"


class ClusterStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def register(
        self, worker_id: str, *, name: str, host: str, pid: int, address: str, lease_secs: float
    ) -> None:
        await self.db.write(
            functools.partial(
                cluster.register,
                worker_id=worker_id,
                name=name,
                host=host,
                pid=pid,
                address=address,
                lease_secs=lease_secs,
            )
        )

    async def same_name_pids(self, worker_id: str, name: str, host: str) -> list[int]:
        return await self.db.read(
            functools.partial(cluster.same_name_pids, worker_id=worker_id, name=name, host=host)
        )

    async def expire_predecessors(
        self, worker_id: str, *, name: str, host: str, gone: Sequence[int]
    ) -> int:
        return await self.db.write(
            functools.partial(
                cluster.expire_predecessors, worker_id=worker_id, name=name, host=host, gone=gone
            )
        )

    async def heartbeat(self, worker_id: str, lease_secs: float) -> Heartbeat:
        return await self.db.write(
            functools.partial(cluster.heartbeat, worker_id=worker_id, lease_secs=lease_secs)
        )

    async def acquire(self, worker_id: str, keys: Sequence[str]) -> dict[str, LeaseHolder]:
        return await self.db.write(
            functools.partial(cluster.acquire, worker_id=worker_id, keys=keys)
        )

    async def holders(self, keys: Sequence[str]) -> dict[str, LeaseHolder]:
        return await self.db.read(functools.partial(cluster.holders, keys=keys))

    async def release(self, worker_id: str, keys: Sequence[str]) -> int:
        return await self.db.write(
            functools.partial(cluster.release_keys, worker_id=worker_id, keys=keys)
        )

    async def leave(self, worker_id: str) -> int:
        """Every lease let go and the worker's row gone (a clean stop)."""
        return await self.db.write(functools.partial(cluster.release_all, worker_id=worker_id))

    async def orphaned_chats(self, older_than_secs: float) -> list[tuple[str, str]]:
        return await self.db.read(
            functools.partial(cluster.orphaned_chats, older_than_secs=older_than_secs)
        )

    async def unfinished_by_id(self, ids: Sequence[int]) -> list[InboxEntry]:
        return await self.db.read(functools.partial(inbox.unfinished_by_id, ids=ids))

    async def unfinished_of_chats(self, chats: Sequence[tuple[str, str]]) -> list[InboxEntry]:
        return await self.db.read(functools.partial(inbox.unfinished_of_chats, chats=chats))

    async def unfinished_keys(self) -> list[tuple[int, str, str]]:
        return await self.db.read(inbox.unfinished_keys)

    async def unfinished_duplicates(self, messages: Sequence[InboundMessage]) -> list[int | None]:
        def each(conn: Connection) -> list[int | None]:
            return [inbox.unfinished_duplicate(conn, m) for m in messages]

        return await self.db.read(each)

    async def outbox_rows(self, ids: Sequence[int]) -> list[OutboxRow]:
        """Rows another worker sent, for this worker's own recipients."""
        return await self.db.read(functools.partial(outbox.rows_by_id, ids=ids))

    async def workers(self) -> tuple[list[WorkerRow], list[LeaseHolder]]:
        def both(conn: Connection) -> tuple[list[WorkerRow], list[LeaseHolder]]:
            return cluster.list_workers(conn), cluster.all_leases(conn)

        return await self.db.read(both)

    async def notify(self, payload: str) -> None:
        """Send `payload` to every listening worker (outside any transaction:
        it goes at once)."""
        await self.db.read(
            lambda conn: conn.execute(
                "SELECT pg_notify(?, ?)", (NOTIFY_CHANNEL, payload)
            ).fetchall()
        )

    async def listen(
        self, on_payload: Callable[[str], None], on_listening: Callable[[], None]
    ) -> None:
        await self.db.listen(NOTIFY_CHANNEL, on_payload, on_listening)
