"""`RetentionStore`: retention's units of work (`Store.retention`, storage.sql.retention).

Each call is one short transaction of at most `limit` rows; the caller loops
until a call says there is nothing left, so other writes interleave.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime

from storage.database import Database
from storage.sql import retention
from storage.sql.retention import Pruned, RetainedTable

__all__ = ["RetentionStore"]


class RetentionStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def prune(
        self, table: RetainedTable, cutoff: datetime, after: int, limit: int
    ) -> Pruned[int]:
        return await self.db.write(
            functools.partial(
                retention.prune_batch, table=table, cutoff=cutoff, after=after, limit=limit
            )
        )

    async def prune_row_state(self, after: tuple[str, str], limit: int) -> Pruned[tuple[str, str]]:
        return await self.db.write(
            functools.partial(retention.prune_row_state_batch, after=after, limit=limit)
        )

    async def outbox_states(self, keys: Sequence[str]) -> dict[str, str]:
        return await self.db.read(functools.partial(retention.outbox_states, keys=keys))

    async def unfinished_media(self) -> set[str]:
        return await self.db.read(retention.unfinished_media)

    async def undelivered_outbox_media(self) -> set[str]:
        return await self.db.read(retention.undelivered_outbox_media)
