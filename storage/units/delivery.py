"""`DeliveryStore`: what an operator does to delivery (`Store.delivery`): the
outbox by state and giving a row up, dead letters recorded again or
discarded. The same storage/sql functions the `picobot outbox` and
`picobot dead-letters` commands run on the database."""

from __future__ import annotations

import functools

from storage.database import Database
from storage.sql.delivery import dead_letters, inbox, outbox
from storage.sql.delivery.inbox import Requeued
from storage.sql.delivery.outbox import OutboxRow, OutboxState

__all__ = ["DeliveryStore"]


class DeliveryStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def outbox_in_state(self, state: OutboxState, limit: int = 100) -> list[OutboxRow]:
        """The rows in `state`: unsent ones oldest first, the others newest first."""
        return await self.db.read(functools.partial(outbox.rows_in_state, state=state, limit=limit))

    async def discard_outbox(self, row_id: int) -> str | None:
        """Give a failed or parked row up (never sent); its channel, or None
        when the row is not failed or parked."""
        return await self.db.write(functools.partial(outbox.discard_row, row_id=row_id))

    async def requeue_dead_letter(self, letter_id: int) -> Requeued | None:
        """A dead letter's message into the inbox, the dead letter gone (None:
        no such dead letter). Raises `inbox.NotAMessage` for a platform's raw
        event, or what the inbox refused it with again (the letter stays)."""
        return await self.db.write(
            functools.partial(inbox.requeue_dead_letter, letter_id=letter_id)
        )

    async def discard_dead_letter(self, letter_id: int) -> bool:
        return await self.db.write(functools.partial(dead_letters.discard, letter_id=letter_id))
