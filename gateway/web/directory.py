"""`StoreDirectory`: the WebSocket channel's `ChatDirectory` on storage.

Read-only: a chat's sessions and the newest messages of one of them, shaped
for display (tool results and arguments cut, prompts the gateway injects left
out), and the command list. Only the client's own chat is ever read.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent.messages import ChatMessage, Marker, Role
from channels.base import (
    CommandInfo,
    History,
    HistoryEntry,
    SessionInfo,
    SessionList,
    ToolCallInfo,
)
from gateway.commands import CommandRegistry
from gateway.i18n import Locale, tr
from storage.sql.conversations.sessions import SessionStatus
from storage.store import Store

__all__ = ["StoreDirectory"]

TEXT_MAX_CHARS = 4_000  # a tool result or argument list shown in a history


def _cut(text: str, limit: int = TEXT_MAX_CHARS) -> tuple[str, bool]:
    return (text, False) if len(text) <= limit else (text[:limit] + "…", True)


def _entry(message: ChatMessage, run_id: str | None) -> HistoryEntry | None:
    at = message.created_at.isoformat()
    if message.role is Role.USER:
        return HistoryEntry("user", message.content, at, run_id)
    if message.role is Role.ASSISTANT:
        calls = []
        for call in message.tool_calls:
            arguments, cut = _cut(call.arguments)
            calls.append(ToolCallInfo(call.id, call.name, arguments, cut))
        return HistoryEntry("assistant", message.content, at, run_id, tool_calls=tuple(calls))
    if message.role is Role.TOOL:
        text, cut = _cut(message.content)
        return HistoryEntry(
            "tool", text, at, run_id, tool_call_id=message.tool_call_id, name=message.name,
            truncated=cut,
        )  # fmt: skip
    if message.marker == Marker.HISTORY_COMPACTION:
        return HistoryEntry("summary", message.content, at, run_id)
    return None  # AGENT.md, skill index, scheduled prompts: the gateway's, not the chat's


class StoreDirectory:
    def __init__(
        self, store: Store, commands: CommandRegistry, channel: str, locale: Locale = Locale.EN
    ) -> None:
        self.store = store
        self.registry = commands
        self.channel = channel
        self.locale = locale  # of the commands' help

    def commands(self) -> Sequence[CommandInfo]:
        return [CommandInfo(c.name, tr(self.locale, c.help)) for c in self.registry]

    async def sessions(self, chat_id: str) -> SessionList:
        records, active = await self.store.list_sessions(self.channel, chat_id)
        return SessionList(
            tuple(
                SessionInfo(
                    r.id,
                    r.title,
                    r.status is SessionStatus.ARCHIVED,
                    r.message_count,
                    r.created_at,
                    r.updated_at,
                )
                for r in records
            ),
            active.id if active is not None else None,
        )

    async def history(self, chat_id: str, session_id: str | None, limit: int) -> History | None:
        found = await self.store.recent_history(self.channel, chat_id, session_id, limit)
        if found is None:
            return None
        entries = (_entry(m, run_id) for m, run_id in found.messages)
        record = found.record
        return History(
            record.id if record is not None else None,
            record.title if record is not None else None,
            tuple(e for e in entries if e is not None),
            found.more,
        )
