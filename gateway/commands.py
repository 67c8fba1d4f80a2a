"""Chat commands (/new, /sessions, /use, /rename, /archive, /delete, /stop, /status, /help).

A command is an inbound message like any other: recorded in the inbox first,
answered through the outbox, and its inbox row closed in the same commit as
its reply. Unknown `/words` are not commands; they go to the agent.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import structlog

from gateway.bus import OutboundMessage, reply_handle
from gateway.execution import WorkItem, session_base_id
from gateway.sessions import SessionManager
from storage import inbox, messages, outbox, sessions
from storage.db import Database
from storage.sessions import SessionRecord, SessionStatus

__all__ = ["COMMANDS", "CommandHandler", "parse_command"]

log = structlog.get_logger(__name__)

COMMANDS: Mapping[str, str] = {
    "help": "list the commands",
    "new": "/new [TITLE]: start a new session and switch to it",
    "sessions": "list this chat's sessions",
    "use": "/use N (or an id or title): switch to another session",
    "rename": "/rename TITLE: rename the current session",
    "archive": "archive the current session and start a new one",
    "delete": "/delete [N or id]: delete a session (default: the current one) for good",
    "stop": "cancel the running task",
    "status": "show the current session's size and context use",
    "compact": "compact the current session's history now",
}


def parse_command(text: str) -> tuple[str, str] | None:
    """('new', 'title') for '/new title'; None when the text is not a known command."""
    stripped = text.strip()
    if not stripped.startswith("/"):
        return None
    head, _, rest = stripped[1:].partition(" ")
    name = head.split("@", 1)[0].lower()  # Telegram appends @botname in groups
    return (name, rest.strip()) if name in COMMANDS else None


@dataclass(frozen=True, slots=True)
class SessionStats:
    record: SessionRecord
    message_count: int
    chars: int


# Pluggable pieces owned by other features. A compact hook queues the work and
# answers the command itself when done; False means it could not be queued.
CompactHook = Callable[[WorkItem, str], bool]
StatusHook = Callable[[SessionStats, str], str]


def _pick(records: list[SessionRecord], ref: str) -> SessionRecord | None:
    if ref.isdigit() and 1 <= int(ref) <= len(records):
        return records[int(ref) - 1]
    for record in records:
        if ref in (record.id, record.title):
            return record
    return None


def _describe(records: list[SessionRecord], active: SessionRecord | None) -> str:
    if not records:
        return "No sessions yet in this chat. Send a message to start one."
    lines = ["Sessions in this chat:"]
    for n, r in enumerate(records, 1):
        title = f' "{r.title}"' if r.title else ""
        status = " (archived)" if r.status is SessionStatus.ARCHIVED else ""
        current = " ← current" if active is not None and r.id == active.id else ""
        lines.append(f"{n}. {r.id}{title} — {r.message_count} messages{status}{current}")
    lines.append("Switch with /use N.")
    return "\n".join(lines)


class CommandHandler:
    def __init__(
        self, db: Database, sessions_: SessionManager, wake: Callable[[str], None]
    ) -> None:
        self.db = db
        self.sessions = sessions_
        self.wake = wake
        self.compact_hook: CompactHook | None = None
        self.status_hook: StatusHook | None = None

    async def handle(self, item: WorkItem, name: str, args: str) -> None:
        m = item.message
        log.info("command", command=name, channel=m.channel)
        reply: str | None
        if name == "stop":
            stopped = self.sessions.stop_turn(m.channel, m.chat_id)
            reply = None if stopped else "Nothing is running."
        elif name == "help":
            reply = "Commands:\n" + "\n".join(f"/{k} — {v}" for k, v in COMMANDS.items())
        elif name == "compact":
            reply = await self._compact(item)
            if reply is None:
                return  # the compactor answers when it is done
        elif name == "status":
            reply = await self._status(m.channel, m.chat_id)
        elif name in {"delete", "archive"} and self.sessions.is_busy(m.channel, m.chat_id):
            reply = "A task is running in this chat; /stop it or wait, then try again."
        else:
            reply = await self.db.write(
                lambda c: self._session_command(c, name, args, m.channel, m.chat_id)
            )
            self.sessions.history_changed(m.channel, m.chat_id)
        # /stop's confirmation comes from the stopped turn itself
        await self._answer(item, reply)

    async def _answer(self, item: WorkItem, text: str | None) -> None:
        m = item.message

        def finish(c: sqlite3.Connection) -> None:
            if text:
                out = OutboundMessage(
                    m.channel, m.chat_id, text, reply_to_message_id=reply_handle(m)
                )
                outbox.enqueue(c, out, item.inbox_id)
            inbox.mark_done(c, [item.inbox_id])

        await self.db.write(finish)
        if text:
            self.wake(m.channel)

    async def _compact(self, item: WorkItem) -> str | None:
        m = item.message
        if self.compact_hook is None:
            return "Compaction is not available in this gateway."
        record = await self.db.read(lambda c: sessions.active_session(c, m.channel, m.chat_id))
        if record is None:
            return "Nothing to compact yet."
        if not self.compact_hook(item, record.id):
            return "Compaction is busy right now; try again in a minute."
        return None

    async def _status(self, channel: str, chat_id: str) -> str:
        def read(c: sqlite3.Connection) -> SessionStats | None:
            record = sessions.active_session(c, channel, chat_id)
            if record is None:
                return None
            history = messages.load_active_history(c, record.id)
            chars = sum(len(h.content) + len(h.reasoning_content or "") for h in history)
            chars += sum(len(t.arguments) for h in history for t in h.tool_calls)
            return SessionStats(record, len(history), chars)

        stats = await self.db.read(read)
        if stats is None:
            return "No session yet in this chat. Send a message to start one."
        busy = "running a task" if self.sessions.is_busy(channel, chat_id) else "idle"
        r = stats.record
        lines = [
            f"Session {r.id}" + (f' "{r.title}"' if r.title else ""),
            f"Messages in the active history: {stats.message_count} (segment {r.segment})",
            f"User turns: {r.user_turns}; state: {busy}",
            f"Last compaction: {r.compacted_at or 'never'}",
        ]
        if self.status_hook is not None:
            lines.append(self.status_hook(stats, channel))
        return "\n".join(lines)

    def _session_command(
        self, c: sqlite3.Connection, name: str, args: str, channel: str, chat_id: str
    ) -> str:
        base = session_base_id(channel, chat_id)
        active = sessions.active_session(c, channel, chat_id)
        if name == "new":
            record = sessions.create_next_session(c, channel, chat_id, base, args or None)
            return f"Started new session {record.id}" + (f' "{args}"' if args else "") + "."
        if name == "sessions":
            return _describe(sessions.list_sessions(c, channel, chat_id), active)
        if name == "use":
            if not args:
                return "Usage: /use N, or a session id or title (see /sessions)."
            target = _pick(sessions.list_sessions(c, channel, chat_id), args)
            if target is None:
                return f"No session {args!r} in this chat. See /sessions."
            sessions.bind_session(c, channel, chat_id, target.id)
            if target.status is SessionStatus.ARCHIVED:
                sessions.set_session_status(c, target.id, SessionStatus.ACTIVE)
            return f"Switched to session {target.id}."
        if name == "rename":
            if not args:
                return "Usage: /rename TITLE."
            if active is None:
                active = sessions.ensure_active_session(c, channel, chat_id, base)
            sessions.rename_session(c, active.id, args)
            return f'Renamed session {active.id} to "{args}".'
        if name == "archive":
            if active is None:
                return "No session to archive."
            sessions.set_session_status(c, active.id, SessionStatus.ARCHIVED)
            fresh = sessions.create_next_session(c, channel, chat_id, base)
            return f"Archived session {active.id}; now in new session {fresh.id}."
        if name == "delete":
            records = sessions.list_sessions(c, channel, chat_id)
            target = _pick(records, args) if args else active
            if target is None:
                return (
                    f"No session {args!r} in this chat. See /sessions."
                    if args
                    else "No session to delete."
                )
            sessions.delete_session(c, target.id)
            if active is not None and target.id == active.id:
                fresh = sessions.create_next_session(c, channel, chat_id, base)
                return f"Deleted session {target.id}; now in new session {fresh.id}."
            return f"Deleted session {target.id}."
        raise ValueError(f"unhandled command {name!r}")
