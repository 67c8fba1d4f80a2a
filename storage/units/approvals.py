"""`ApprovalStore`: held tool calls as named units of work (`Store.approvals`).

Like `Store`, each method is one transaction; a returned write is durable.
The states and what each move means: storage/sql/approvals.py.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Sequence

from agent.messages import ChatMessage
from gateway.bus import OutboundMessage
from storage.database import Database
from storage.sql import approvals
from storage.sql.approvals import ApprovalRecord, ApprovalState, NewApproval, Paused
from storage.sql.conversations.turns import DeferredOpening

__all__ = ["ApprovalStore"]


class ApprovalStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def pause_turn(
        self,
        new: NewApproval,
        run_id: str,
        deferred: DeferredOpening | None,
        prompt: Callable[[int], OutboundMessage],
        previous: int | None,
        *,
        on_commit: Callable[[Paused], None] | None = None,
    ) -> Paused:
        """`on_commit` gets the result right after the commit, even if the
        caller is cancelled meanwhile."""
        return await self.db.write(
            functools.partial(
                approvals.pause_turn,
                new=new,
                run_id=run_id,
                deferred=deferred,
                prompt=prompt,
                previous=previous,
            ),
            on_commit=on_commit,
        )

    async def get(self, approval_id: int) -> ApprovalRecord | None:
        return await self.db.read(functools.partial(approvals.get, approval_id=approval_id))

    async def open(self) -> list[ApprovalRecord]:
        """Every approval not done yet, oldest first."""
        return await self.db.read(approvals.open_approvals)

    async def move(
        self,
        approval_id: int,
        leaving: Sequence[ApprovalState],
        to: ApprovalState,
        *,
        approved: bool | None = None,
        reason: str | None = None,
        decided_by: str | None = None,
    ) -> bool:
        return await self.db.write(
            functools.partial(
                approvals.move,
                approval_id=approval_id,
                leaving=leaving,
                to=to,
                approved=approved,
                reason=reason,
                decided_by=decided_by,
            )
        )

    async def settle(
        self, approval_id: int, run_id: str, results: Sequence[ChatMessage], *, done: bool
    ) -> bool:
        return await self.db.write(
            functools.partial(
                approvals.settle, approval_id=approval_id, run_id=run_id, results=results, done=done
            )
        )

    async def stop(
        self,
        approval_id: int,
        run_id: str,
        results: Sequence[ChatMessage],
        out: OutboundMessage | None,
        inbox_ids: Sequence[int],
        *,
        on_commit: Callable[[int | None], None] | None = None,
    ) -> int | None:
        """`approvals.stop`: the calls /stop cancelled, the row done, the notice."""
        return await self.db.write(
            functools.partial(
                approvals.stop,
                approval_id=approval_id,
                run_id=run_id,
                results=results,
                out=out,
                inbox_ids=inbox_ids,
            ),
            on_commit=on_commit,
        )

    async def close_broken_turn(
        self, approval_id: int, run_id: str, inbox_ids: Sequence[int], out: OutboundMessage | None
    ) -> int | None:
        """`approvals.close_broken` in one commit; shielded like `Store.answer`."""
        close = functools.partial(
            approvals.close_broken,
            approval_id=approval_id,
            run_id=run_id,
            inbox_ids=inbox_ids,
            out=out,
        )
        return await asyncio.shield(self.db.write(close))

    async def finish_turn(
        self,
        approval_id: int,
        session_id: str,
        run_id: str,
        reply: ChatMessage | None,
        deferred: DeferredOpening | None,
        out: OutboundMessage | None,
        inbox_ids: Sequence[int],
        *,
        on_commit: Callable[[int | None], None] | None = None,
        failed: bool = False,
    ) -> int | None:
        """`Store.finish_turn` for a turn carried on from an approval, which
        is done in the same commit."""
        return await self.db.write(
            functools.partial(
                approvals.finish_resumed,
                approval_id=approval_id,
                session_id=session_id,
                run_id=run_id,
                reply=reply,
                deferred=deferred,
                out=out,
                inbox_ids=inbox_ids,
                failed=failed,
            ),
            on_commit=on_commit,
        )
