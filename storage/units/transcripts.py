"""`TranscriptStore`: the units of work of sub-agent transcripts
(storage/sql/conversations/subagents.py), of `send_session_message` (storage/sql/conversations/sent_messages.py)
and of the operator's reads of every conversation (storage/sql/conversations/browse.py),
reached as `Store.transcripts`. Each method is one transaction."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Sequence
from datetime import datetime

from agent.messages import ChatMessage
from gateway.bus import OutboundMessage
from storage.database import Database
from storage.sql.access.rate_events import RateLimit
from storage.sql.conversations import browse, messages, sent_messages, sessions, subagents
from storage.sql.conversations.browse import Found, SessionQuery, Transcript
from storage.sql.conversations.sent_messages import Limited, Queued
from storage.sql.conversations.sessions import SessionRecord
from storage.sql.conversations.subagents import ChildOpened

__all__ = ["TranscriptStore"]


class TranscriptStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def open_child(
        self,
        child_id: str,
        parent_id: str,
        title: str,
        new: Sequence[ChatMessage],
        run_id: str,
    ) -> ChildOpened:
        return await self.db.write(
            functools.partial(
                subagents.open_child,
                child_id=child_id,
                parent_id=parent_id,
                title=title,
                new=new,
                run_id=run_id,
            )
        )

    async def close_child(self, child_id: str, run_id: str, note: str) -> None:
        """Shielded: a cancelled child's transcript is closed even as it unwinds."""
        close = functools.partial(
            subagents.close_child, child_id=child_id, run_id=run_id, note=note
        )
        await asyncio.shield(self.db.write(close))

    async def children_of(self, parent_id: str) -> list[SessionRecord]:
        return await self.db.read(functools.partial(subagents.children_of, parent_id=parent_id))

    async def session_messages(self, session_id: str) -> list[ChatMessage]:
        """The session's active history (e.g. a sub-agent's transcript)."""
        return await self.db.read(
            functools.partial(messages.load_active_history, session_id=session_id)
        )

    async def session(self, session_id: str) -> SessionRecord | None:
        return await self.db.read(functools.partial(sessions.get_session, session_id=session_id))

    async def find_sessions(self, query: SessionQuery) -> Found:
        """Sessions across channels, newest activity first, a page at a time."""
        return await self.db.read(functools.partial(browse.find_sessions, query=query))

    async def transcript(
        self, session_id: str, before: int | None = None, limit: int = browse.MAX_ROWS
    ) -> Transcript | None:
        """A page of the session's whole transcript (None: no such session)."""
        return await self.db.read(
            functools.partial(browse.transcript, session_id=session_id, before=before, limit=limit)
        )

    async def record_session_message(
        self,
        message: OutboundMessage,
        base_id: str,
        limit: RateLimit,
        keys: Sequence[str],
        now: datetime,
        on_commit: Callable[[Queued | Limited], None],
    ) -> Queued | Limited:
        """The send counted against `keys` and stored, or `Limited` and nothing
        stored (storage.sql.conversations.sent_messages); `on_commit` gets the outcome right
        after the commit."""
        return await self.db.write(
            functools.partial(
                sent_messages.record_session_message,
                message=message,
                base_id=base_id,
                limit=limit,
                keys=keys,
                now=now,
            ),
            on_commit=on_commit,
        )
