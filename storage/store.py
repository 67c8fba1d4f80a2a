"""`Store`: the runtime's storage, as named units of work.

The gateway runtime calls these async methods and never writes SQL or sees a
connection. Each method is one transaction: writes go through
`Database.write` (group-committed; a returned write is durable), reads through
`Database.read`, on whichever backend `storage.url` chose (storage.database):
the same methods, the same SQL (storage/sql/), the same guarantees.
"""

from __future__ import annotations

import asyncio
import functools
import sqlite3
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from agent.messages import ChatMessage
from gateway.bus import InboundMessage, OutboundMessage
from storage.clock import now_iso
from storage.database import Database
from storage.sql import jobs, skill_events
from storage.sql.access import chat_owners, pairings
from storage.sql.access.pairings import Approval, CodeRules, Issue, Pairing
from storage.sql.access.rate_events import RateStore
from storage.sql.conversations import commands as conversations
from storage.sql.conversations import messages, sessions, turns
from storage.sql.conversations.commands import RecentHistory, Replaced, SessionStats
from storage.sql.conversations.compaction import commit_compaction
from storage.sql.conversations.sessions import SessionRecord
from storage.sql.conversations.turns import (
    Begun,
    CachedHistory,
    DeferredOpening,
    Opening,
    PromptCheck,
)
from storage.sql.delivery import channel_state, dead_letters, inbox, outbox
from storage.sql.delivery.dead_letters import DeadLetter
from storage.sql.delivery.inbox import InboxEntry
from storage.sql.delivery.outbox import Held, OutboxRow, Scan
from storage.sql.jobs import JobRecord, RunRecord
from storage.sql.skill_events import SkillEventRow
from storage.sql.spend import SpendStore
from storage.units.approvals import ApprovalStore
from storage.units.cluster import ClusterStore
from storage.units.delivery import DeliveryStore
from storage.units.memories import MemoryStore
from storage.units.retention import RetentionStore
from storage.units.transcripts import TranscriptStore

__all__ = ["Store"]


class Store:
    def __init__(self, db: Database) -> None:
        self.db = db
        self.memories = MemoryStore(db)  # long-term memory (docs/memory.md)
        self.transcripts = TranscriptStore(db)  # sub-agents, session messages (docs/subagents.md)
        self.approvals = ApprovalStore(db)  # held tool calls (docs/approvals.md)
        self.retention = RetentionStore(db)  # pruning what is finished (docs/OPERATIONS.md)
        # limits that survive a restart (storage/sql/access/rate_events.py)
        self.rates = RateStore(db)
        self.spend = SpendStore(db)  # budgets and usage (storage/sql/spend.py)
        self.delivery = DeliveryStore(db)  # the operator's outbox and dead letters
        self.cluster = ClusterStore(db)  # workers and leases (docs/scale-out.md)

    # -- inbox ---------------------------------------------------------------
    async def record_inbound(self, batch: Sequence[InboundMessage]) -> list[int | Exception | None]:
        """One job per message sharing a commit: each the new row id, None for
        a duplicate, or the exception that failed that one alone."""
        return await self.db.write_each(
            [functools.partial(inbox.record_inbound, message=m) for m in batch]
        )

    async def unfinished_inbox(self) -> list[InboxEntry]:
        return await self.db.read(inbox.unfinished_entries)

    async def set_aside_unreadable_inbox(self) -> list[int]:
        """Dead-letter and close unfinished rows that no longer parse (at start)."""
        return await self.db.write(inbox.set_aside_unreadable)

    async def answer(self, inbox_ids: Sequence[int], reply: OutboundMessage | None) -> int | None:
        """Close inbox rows with `reply` (if any) as an outbox row, in one commit.
        Shielded: once called, the answer is stored even if the caller is cancelled."""
        answer = functools.partial(inbox.answer, inbox_ids=inbox_ids, reply=reply)
        return await asyncio.shield(self.db.write(answer))

    # -- dead letters (storage/sql/delivery/dead_letters.py) --------------------------------
    async def record_dead_letter(
        self, channel: str, platform_id: str | None, payload: str | bytes, reason: str
    ) -> int:
        return await self.db.write(
            functools.partial(
                dead_letters.record,
                channel=channel,
                platform_id=platform_id,
                payload=payload,
                reason=reason,
            )
        )

    async def dead_letters(self, limit: int, channel: str | None = None) -> list[DeadLetter]:
        return await self.db.read(
            functools.partial(dead_letters.recent, limit=limit, channel=channel)
        )

    async def dead_letter(self, letter_id: int) -> DeadLetter | None:
        return await self.db.read(functools.partial(dead_letters.get, letter_id=letter_id))

    # -- turns ---------------------------------------------------------------
    async def begin_turn(
        self, opening: Opening, cached: CachedHistory | None, prompt: PromptCheck | None
    ) -> Begun:
        return await self.db.write(
            functools.partial(turns.begin_turn, opening=opening, cached=cached, prompt=prompt)
        )

    async def append_turn(
        self,
        session_id: str,
        run_id: str,
        new: Sequence[ChatMessage],
        deferred: DeferredOpening | None,
    ) -> None:
        await self.db.write(
            functools.partial(
                turns.append_turn,
                session_id=session_id,
                run_id=run_id,
                new=new,
                deferred=deferred,
            )
        )

    async def close_broken_turn(
        self, run_id: str, inbox_ids: Sequence[int], out: OutboundMessage | None
    ) -> int | None:
        """`turns.close_broken` in one commit; shielded like `answer`."""
        close = functools.partial(turns.close_broken, run_id=run_id, inbox_ids=inbox_ids, out=out)
        return await asyncio.shield(self.db.write(close))

    async def finish_turn(
        self,
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
        """`on_commit` gets the outbox row id right after the commit, even if
        the caller is cancelled meanwhile. `failed`: the turn failed; its
        messages stay stored but out of later histories."""
        return await self.db.write(
            functools.partial(
                turns.finish_turn,
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

    # -- sessions --------------------------------------------------------------
    async def chats_with_prefix(self, channel: str, prefix: str) -> list[str]:
        """The chat ids of `channel` beginning with `prefix` that have a session."""
        return await self.db.read(
            functools.partial(sessions.chats_with_prefix, channel=channel, prefix=prefix)
        )

    async def active_session(self, channel: str, chat_id: str) -> SessionRecord | None:
        return await self.db.read(
            functools.partial(sessions.active_session, channel=channel, chat_id=chat_id)
        )

    async def session_stats(self, channel: str, chat_id: str) -> SessionStats | None:
        return await self.db.read(
            functools.partial(conversations.session_stats, channel=channel, chat_id=chat_id)
        )

    async def list_sessions(
        self, channel: str, chat_id: str
    ) -> tuple[list[SessionRecord], SessionRecord | None]:
        return await self.db.read(
            functools.partial(conversations.list_with_active, channel=channel, chat_id=chat_id)
        )

    async def recent_sessions(
        self, channel: str | None = None, chat_id: str | None = None, limit: int = 50
    ) -> list[SessionRecord]:
        """Across chats, the most recently active first (`picobot sessions list`)."""
        return await self.db.read(
            functools.partial(
                sessions.recent_sessions, channel=channel, chat_id=chat_id, limit=limit
            )
        )

    async def new_session(
        self, channel: str, chat_id: str, base_id: str, title: str | None
    ) -> SessionRecord:
        return await self.db.write(
            functools.partial(
                conversations.new_session,
                channel=channel,
                chat_id=chat_id,
                base_id=base_id,
                title=title,
            )
        )

    async def switch_session(self, channel: str, chat_id: str, ref: str) -> SessionRecord | None:
        return await self.db.write(
            functools.partial(
                conversations.switch_session, channel=channel, chat_id=chat_id, ref=ref
            )
        )

    async def rename_active(
        self, channel: str, chat_id: str, base_id: str, title: str
    ) -> SessionRecord:
        return await self.db.write(
            functools.partial(
                conversations.rename_active,
                channel=channel,
                chat_id=chat_id,
                base_id=base_id,
                title=title,
            )
        )

    async def archive_session(
        self, channel: str, chat_id: str, base_id: str, session_id: str | None = None
    ) -> Replaced | None:
        return await self.db.write(
            functools.partial(
                conversations.archive_session,
                channel=channel,
                chat_id=chat_id,
                base_id=base_id,
                session_id=session_id,
            )
        )

    async def delete_session(
        self,
        channel: str,
        chat_id: str,
        base_id: str,
        ref: str | None,
        session_id: str | None = None,
    ) -> Replaced | None:
        return await self.db.write(
            functools.partial(
                conversations.delete_session,
                channel=channel,
                chat_id=chat_id,
                base_id=base_id,
                ref=ref,
                session_id=session_id,
            )
        )

    async def recent_history(
        self, channel: str, chat_id: str, session_id: str | None, limit: int
    ) -> RecentHistory | None:
        return await self.db.read(
            functools.partial(
                conversations.recent_history,
                channel=channel,
                chat_id=chat_id,
                session_id=session_id,
                limit=limit,
            )
        )

    # -- compaction ------------------------------------------------------------
    async def history_snapshot(
        self, session_id: str
    ) -> tuple[SessionRecord | None, list[ChatMessage]]:
        def read(c: sqlite3.Connection) -> tuple[SessionRecord | None, list[ChatMessage]]:
            return sessions.get_session(c, session_id), messages.load_active_history(c, session_id)

        return await self.db.read(read)

    async def commit_compaction(
        self,
        session_id: str,
        segment: int,
        new_history: Sequence[ChatMessage],
        snapshot_last_seq: int | None,
    ) -> int:
        """The new segment; raises `CompactionConflict` if the history moved."""
        return await self.db.write(
            functools.partial(
                commit_compaction,
                session_id=session_id,
                expected_segment=segment,
                new_messages=new_history,
                compacted_at_iso=now_iso(),
                snapshot_last_seq=snapshot_last_seq,
            )
        )

    # -- outbox ----------------------------------------------------------------
    async def reply_of(
        self, channel: str, chat_id: str, message_id: str
    ) -> tuple[bool, str | None, dict[str, Any]]:
        """Whether `message_id` was recorded, and its last reply (text, metadata)."""
        return await self.db.read(
            functools.partial(
                outbox.reply_of, channel=channel, chat_id=chat_id, message_id=message_id
            )
        )

    async def enqueue(self, message: OutboundMessage, inbox_id: int | None = None) -> int:
        return await self.db.write(
            functools.partial(outbox.enqueue, message=message, inbox_id=inbox_id)
        )

    async def outbox_scan(self, channel: str) -> Scan:
        return await self.db.read(functools.partial(outbox.scan, channel=channel, now=now_iso()))

    def mark_sent_soon(self, row_id: int) -> asyncio.Future[None] | None:
        """Queue the mark for the next group commit without waiting; None when
        the write queue is full (then await `mark_sent`)."""
        return self.db.submit(functools.partial(outbox.mark_sent, ids=[row_id]))

    async def mark_sent(self, row_id: int) -> None:
        await asyncio.shield(self.db.write(functools.partial(outbox.mark_sent, ids=[row_id])))

    async def park(self, row_id: int, reason: str) -> None:
        await self.db.write(functools.partial(outbox.park, row_id=row_id, reason=reason))

    async def mark_failed(self, row_id: int, reason: str) -> None:
        await self.db.write(functools.partial(outbox.mark_failed, row_id=row_id, error=reason))

    async def reschedule(self, row_id: int, next_at: str, reason: str) -> None:
        await self.db.write(
            functools.partial(outbox.reschedule, row_id=row_id, next_at=next_at, error=reason)
        )

    async def unpark(self, channel: str, chat_ids: Sequence[str]) -> None:
        await self.db.write(functools.partial(_unpark_all, channel=channel, chat_ids=chat_ids))

    async def outbox_hold(self, channel: str, until: str, clock_before: str, reason: str) -> Held:
        return await self.db.write(
            functools.partial(
                outbox.hold, channel=channel, until=until, clock_before=clock_before, reason=reason
            )
        )

    async def outbox_resume(self, channel: str) -> int:
        return await self.db.write(functools.partial(outbox.resume, channel=channel))

    async def outbox_counts(self) -> dict[str, int]:
        return await self.db.read(outbox.outbox_counts)

    async def unsent_counts(self) -> dict[str, int]:
        return await self.db.read(outbox.unsent_counts)

    async def outbox_rows(self, *, failed_only: bool = False, limit: int = 100) -> list[OutboxRow]:
        """Rows not yet sent (or only the failed ones), oldest first."""
        return await self.db.read(
            functools.partial(outbox.list_rows, failed_only=failed_only, limit=limit)
        )

    async def retry_outbox(self, row_id: int) -> str | None:
        """A failed or parked row back to pending with a fresh attempt budget;
        its channel, or None when the row is not failed or parked."""
        return await self.db.write(functools.partial(outbox.retry_row_of_channel, row_id=row_id))

    # -- scheduler (read-only views) ---------------------------------------------
    async def scheduled_jobs(self) -> list[tuple[JobRecord, RunRecord | None]]:
        """Every job with its latest run."""

        def read(c: sqlite3.Connection) -> list[tuple[JobRecord, RunRecord | None]]:
            last = jobs.last_runs(c)
            return [(job, last.get(job.id)) for job in jobs.list_jobs(c)]

        return await self.db.read(read)

    # -- channel state -----------------------------------------------------------
    async def channel_state(self, channel: str, key: str) -> str | None:
        return await self.db.read(
            functools.partial(channel_state.get_state, channel=channel, key=key)
        )

    async def set_channel_state(self, channel: str, key: str, value: str) -> None:
        await self.db.write(
            functools.partial(channel_state.set_state, channel=channel, key=key, value=value)
        )

    # -- chat owners (storage/sql/access/chat_owners.py) ------------------------------------
    async def claim_chat(
        self,
        channel: str,
        chat_id: str,
        principal: str,
        legacy_owner: Callable[[Sequence[str]], str],
    ) -> str:
        """The chat's owner, recording one if it has none: `principal` for a
        new chat, `legacy_owner(senders)` for a chat used before owners were
        recorded. Of two racing claims of a new chat exactly one wins."""

        def read(c: sqlite3.Connection) -> tuple[str | None, list[str] | None]:
            owner = chat_owners.owner_of(c, channel, chat_id)
            if owner is not None:
                return owner, None
            return None, chat_owners.legacy_senders(c, channel, chat_id)

        owner, senders = await self.db.read(read)
        if owner is not None:
            return owner
        candidate = principal if senders is None else legacy_owner(senders)
        return await self.db.write(
            functools.partial(chat_owners.claim, channel=channel, chat_id=chat_id, owner=candidate)
        )

    # -- pairings (access control) ----------------------------------------------
    async def approved_senders(self, senders: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
        return await self.db.read(functools.partial(pairings.approved_among, senders=senders))

    async def issue_pairing_code(
        self,
        channel: str,
        sender_id: str,
        chat_id: str,
        make_code: Callable[[], str],
        now: datetime,
        rules: CodeRules,
    ) -> Issue:
        return await self.db.write(
            functools.partial(
                pairings.issue_code,
                channel=channel,
                sender_id=sender_id,
                chat_id=chat_id,
                make_code=make_code,
                now=now,
                rules=rules,
            )
        )

    async def approve_pairing(
        self, code: str, approved_by: str, now: datetime, notice: Callable[[str], str] | None
    ) -> Approval:
        return await self.db.write(
            functools.partial(
                pairings.approve, code=code, approved_by=approved_by, now=now, notice=notice
            )
        )

    async def revoke_pairing(self, channel: str, sender_id: str, now: datetime) -> int:
        return await self.db.write(
            functools.partial(pairings.revoke, channel=channel, sender_id=sender_id, now=now)
        )

    async def list_pairings(self, now: datetime, limit: int | None = None) -> list[Pairing]:
        """Approvals and live codes, oldest first (the newest `limit` of them)."""
        return await self.db.read(functools.partial(pairings.list_pairings, now=now, limit=limit))

    async def pairing_of(self, channel: str, sender_id: str, now: datetime) -> Pairing | None:
        return await self.db.read(
            functools.partial(pairings.pairing_of, channel=channel, sender_id=sender_id, now=now)
        )

    # -- skill events -----------------------------------------------------------------
    async def record_skill_events(self, rows: Sequence[SkillEventRow]) -> None:
        await self.db.write(functools.partial(skill_events.record, rows=rows))

    async def skill_events(self, skill: str | None = None, limit: int = 50) -> list[SkillEventRow]:
        return await self.db.read(
            functools.partial(skill_events.list_events, skill=skill, limit=limit)
        )


def _unpark_all(conn: sqlite3.Connection, *, channel: str, chat_ids: Sequence[str]) -> None:
    for chat_id in chat_ids:
        outbox.unpark(conn, channel, chat_id)
