"""The built-in chat commands: /help, /new, /sessions, /use, /rename,
/archive, /delete, /stop, /status, /compact. Each is a handler in the
`CommandRegistry`; the storage work is one named unit each (`Store`)."""

from __future__ import annotations

from collections.abc import Callable

from gateway.commands import ANSWERED_ELSEWHERE, Command, CommandCall, CommandRegistry, CommandReply
from gateway.sessions import SessionManager
from gateway.work import WorkItem, session_base_id
from storage.conversations import SessionStats
from storage.sessions import SessionRecord, SessionStatus
from storage.store import Store

__all__ = ["SessionCommands"]

# A compact hook queues the work and answers the command itself when done;
# False means it could not be queued.
CompactHook = Callable[[WorkItem, str], bool]
StatusHook = Callable[[SessionStats, str], str]  # (stats, channel) → one more /status line


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


class SessionCommands:
    def __init__(
        self,
        store: Store,
        sessions: SessionManager,
        registry: CommandRegistry,
        *,
        history_changed: Callable[[str, str], None],
        compact: CompactHook | None = None,
        status_line: StatusHook | None = None,
        usage_line: StatusHook | None = None,
    ) -> None:
        self.store = store
        self.sessions = sessions
        self.registry = registry
        self.history_changed = history_changed  # (channel, chat_id): drop cached history
        self.compact_hook = compact
        self.status_hook = status_line
        self.usage_hook = usage_line  # tokens and cost of the session
        for name, help_, handler in (
            ("help", "list the commands", self.help),
            ("new", "/new [TITLE]: start a new session and switch to it", self.new),
            ("sessions", "list this chat's sessions", self.list),
            ("use", "/use N (or an id or title): switch to another session", self.use),
            ("rename", "/rename TITLE: rename the current session", self.rename),
            ("archive", "archive the current session and start a new one", self.archive),
            (
                "delete",
                "/delete [N or id]: delete a session (default: the current one) for good",
                self.delete,
            ),
            ("stop", "cancel the running task", self.stop),
            ("status", "show the session's size, context use and tokens", self.status),
            ("compact", "compact the current session's history now", self.compact),
        ):
            registry.add(Command(name, help_, handler))

    async def help(self, call: CommandCall) -> CommandReply:
        return self.registry.help_text()

    async def stop(self, call: CommandCall) -> CommandReply:
        # the stopped turn confirms it itself
        return (
            None if self.sessions.stop_turn(call.channel, call.chat_id) else "Nothing is running."
        )

    async def new(self, call: CommandCall) -> CommandReply:
        base = session_base_id(call.channel, call.chat_id)
        record = await self.store.new_session(call.channel, call.chat_id, base, call.args or None)
        self.history_changed(call.channel, call.chat_id)
        title = f' "{call.args}"' if call.args else ""
        return f"Started new session {record.id}{title}."

    async def list(self, call: CommandCall) -> CommandReply:
        records, active = await self.store.list_sessions(call.channel, call.chat_id)
        return _describe(records, active)

    async def use(self, call: CommandCall) -> CommandReply:
        if not call.args:
            return "Usage: /use N, or a session id or title (see /sessions)."
        target = await self.store.switch_session(call.channel, call.chat_id, call.args)
        if target is None:
            return f"No session {call.args!r} in this chat. See /sessions."
        self.history_changed(call.channel, call.chat_id)
        return f"Switched to session {target.id}."

    async def rename(self, call: CommandCall) -> CommandReply:
        if not call.args:
            return "Usage: /rename TITLE."
        base = session_base_id(call.channel, call.chat_id)
        record = await self.store.rename_active(call.channel, call.chat_id, base, call.args)
        self.history_changed(call.channel, call.chat_id)
        return f'Renamed session {record.id} to "{call.args}".'

    def _busy(self, call: CommandCall) -> str | None:
        if self.sessions.is_busy(call.channel, call.chat_id):
            return "A task is running in this chat; /stop it or wait, then try again."
        return None

    async def archive(self, call: CommandCall) -> CommandReply:
        if busy := self._busy(call):
            return busy
        base = session_base_id(call.channel, call.chat_id)
        replaced = await self.store.archive_active(call.channel, call.chat_id, base)
        self.history_changed(call.channel, call.chat_id)
        if replaced is None or replaced.fresh is None:
            return "No session to archive."
        return f"Archived session {replaced.old.id}; now in new session {replaced.fresh.id}."

    async def delete(self, call: CommandCall) -> CommandReply:
        if busy := self._busy(call):
            return busy
        base = session_base_id(call.channel, call.chat_id)
        replaced = await self.store.delete_session(
            call.channel, call.chat_id, base, call.args or None
        )
        self.history_changed(call.channel, call.chat_id)
        if replaced is None:
            if call.args:
                return f"No session {call.args!r} in this chat. See /sessions."
            return "No session to delete."
        if replaced.fresh is not None:
            return f"Deleted session {replaced.old.id}; now in new session {replaced.fresh.id}."
        return f"Deleted session {replaced.old.id}."

    async def compact(self, call: CommandCall) -> CommandReply:
        if self.compact_hook is None:
            return "Compaction is not available in this gateway."
        record = await self.store.active_session(call.channel, call.chat_id)
        if record is None:
            return "Nothing to compact yet."
        if not self.compact_hook(call.item, record.id):
            return "Compaction is busy right now; try again in a minute."
        return ANSWERED_ELSEWHERE

    async def status(self, call: CommandCall) -> CommandReply:
        stats = await self.store.session_stats(call.channel, call.chat_id)
        if stats is None:
            return "No session yet in this chat. Send a message to start one."
        busy = "running a task" if self.sessions.is_busy(call.channel, call.chat_id) else "idle"
        r = stats.record
        lines = [
            f"Session {r.id}" + (f' "{r.title}"' if r.title else ""),
            f"Messages in the active history: {stats.message_count} (segment {r.segment})",
            f"User turns: {r.user_turns}; state: {busy}",
            f"Last compaction: {r.compacted_at or 'never'}",
        ]
        if self.status_hook is not None:
            lines.append(self.status_hook(stats, call.channel))
        if self.usage_hook is not None:
            lines.append(self.usage_hook(stats, call.channel))
        return "\n".join(lines)
