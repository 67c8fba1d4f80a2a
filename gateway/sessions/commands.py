"""The built-in chat commands: /help, /new, /sessions, /use, /rename,
/archive, /delete, /stop, /status, /compact. Each is a handler in the
`CommandRegistry`; the storage work is one named unit each (`Store`).
Archiving and deleting a session are also the console's (gateway.console):
`SessionCommands.archive_session` and `delete_session` serve both."""

from __future__ import annotations

from collections.abc import Callable

from gateway.commands import ANSWERED_ELSEWHERE, Command, CommandCall, CommandRegistry, CommandReply
from gateway.i18n import Locale, Msg, tr
from gateway.sessions.manager import SessionManager
from gateway.work import WorkItem, session_base_id
from storage.sql.conversations.commands import Replaced, SessionStats
from storage.sql.conversations.sessions import SessionRecord, SessionStatus
from storage.store import Store

__all__ = ["SessionBusy", "SessionCommands"]

# A compact hook queues the work and answers the command itself when done;
# False means it could not be queued.
CompactHook = Callable[[WorkItem, str], bool]
# (stats, channel, locale) → one more /status line
StatusHook = Callable[[SessionStats, str, Locale], str]


class SessionBusy(Exception):
    """The conversation's sessions may not change now: `reason` says why."""

    def __init__(self, reason: Msg) -> None:
        super().__init__(reason.value)
        self.reason = reason


def _title(locale: Locale, title: str | None) -> str:
    return tr(locale, Msg.TITLE, title=title) if title else ""


def _describe(locale: Locale, records: list[SessionRecord], active: SessionRecord | None) -> str:
    if not records:
        return tr(locale, Msg.NO_SESSIONS)
    lines = [tr(locale, Msg.SESSIONS_HEADER)]
    for n, r in enumerate(records, 1):
        archived = r.status is SessionStatus.ARCHIVED
        current = active is not None and r.id == active.id
        lines.append(
            tr(
                locale,
                Msg.SESSIONS_LINE,
                n=n,
                id=r.id,
                title=_title(locale, r.title),
                count=r.message_count,
                archived=tr(locale, Msg.SESSIONS_ARCHIVED) if archived else "",
                current=tr(locale, Msg.SESSIONS_CURRENT) if current else "",
            )
        )
    lines.append(tr(locale, Msg.SESSIONS_FOOTER))
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
        waiting_approval: Callable[[str, str], bool] | None = None,
    ) -> None:
        self.store = store
        self.sessions = sessions
        self.registry = registry
        self.history_changed = history_changed  # (channel, chat_id): drop cached history
        self.compact_hook = compact
        self.status_hook = status_line
        self.usage_hook = usage_line  # tokens and cost of the session
        # (channel, chat_id): a turn paused for approval still owns the session
        self.waiting_approval = waiting_approval
        for name, help_, handler in (
            ("help", Msg.HELP_HELP, self.help),
            ("new", Msg.HELP_NEW, self.new),
            ("sessions", Msg.HELP_SESSIONS, self.list),
            ("use", Msg.HELP_USE, self.use),
            ("rename", Msg.HELP_RENAME, self.rename),
            ("archive", Msg.HELP_ARCHIVE, self.archive),
            ("delete", Msg.HELP_DELETE, self.delete),
            ("stop", Msg.HELP_STOP, self.stop),
            ("status", Msg.HELP_STATUS, self.status),
            ("compact", Msg.HELP_COMPACT, self.compact),
        ):
            registry.add(Command(name, help_, handler))

    async def help(self, call: CommandCall) -> CommandReply:
        return self.registry.help_text(call.locale)

    async def stop(self, call: CommandCall) -> CommandReply:
        # the stopped turn confirms it itself
        if self.sessions.stop_turn(call.channel, call.chat_id):
            return None
        return tr(call.locale, Msg.NOTHING_RUNNING)

    async def new(self, call: CommandCall) -> CommandReply:
        base = session_base_id(call.channel, call.chat_id)
        record = await self.store.new_session(call.channel, call.chat_id, base, call.args or None)
        self.history_changed(call.channel, call.chat_id)
        return tr(call.locale, Msg.NEW_SESSION, id=record.id, title=_title(call.locale, call.args))

    async def list(self, call: CommandCall) -> CommandReply:
        records, active = await self.store.list_sessions(call.channel, call.chat_id)
        return _describe(call.locale, records, active)

    async def use(self, call: CommandCall) -> CommandReply:
        if not call.args:
            return tr(call.locale, Msg.USE_USAGE)
        target = await self.store.switch_session(call.channel, call.chat_id, call.args)
        if target is None:
            return tr(call.locale, Msg.NO_SUCH_SESSION, name=call.args)
        self.history_changed(call.channel, call.chat_id)
        return tr(call.locale, Msg.SWITCHED, id=target.id)

    async def rename(self, call: CommandCall) -> CommandReply:
        if not call.args:
            return tr(call.locale, Msg.RENAME_USAGE)
        base = session_base_id(call.channel, call.chat_id)
        record = await self.store.rename_active(call.channel, call.chat_id, base, call.args)
        self.history_changed(call.channel, call.chat_id)
        return tr(call.locale, Msg.RENAMED, id=record.id, title=call.args)

    def busy(self, channel: str, chat_id: str) -> Msg | None:
        """Why the conversation's sessions may not be archived or deleted now
        (a turn runs, or one waits for an approval: it still owns its
        session); None when they may."""
        if self.sessions.is_busy(channel, chat_id):
            return Msg.BUSY
        if self.waiting_approval is not None and self.waiting_approval(channel, chat_id):
            return Msg.BUSY_APPROVAL
        return None

    async def archive_session(
        self, channel: str, chat_id: str, session_id: str | None = None
    ) -> Replaced | None:
        """Archive `session_id` (default: the active one; a fresh session
        replaces the active one): /archive and the console. Raises
        `SessionBusy` while the conversation is busy."""
        if (why := self.busy(channel, chat_id)) is not None:
            raise SessionBusy(why)
        base = session_base_id(channel, chat_id)
        replaced = await self.store.archive_session(channel, chat_id, base, session_id)
        self.history_changed(channel, chat_id)
        return replaced

    async def delete_session(
        self, channel: str, chat_id: str, ref: str | None = None, *, session_id: str | None = None
    ) -> Replaced | None:
        """Delete the session `ref` names or `session_id` is (default: the
        active one) for good: /delete and the console. Raises `SessionBusy`
        while the conversation is busy."""
        if (why := self.busy(channel, chat_id)) is not None:
            raise SessionBusy(why)
        base = session_base_id(channel, chat_id)
        replaced = await self.store.delete_session(channel, chat_id, base, ref, session_id)
        self.history_changed(channel, chat_id)
        return replaced

    async def archive(self, call: CommandCall) -> CommandReply:
        try:
            replaced = await self.archive_session(call.channel, call.chat_id)
        except SessionBusy as busy:
            return tr(call.locale, busy.reason)
        if replaced is None or replaced.fresh is None:
            return tr(call.locale, Msg.NOTHING_TO_ARCHIVE)
        return tr(call.locale, Msg.ARCHIVED, old=replaced.old.id, new=replaced.fresh.id)

    async def delete(self, call: CommandCall) -> CommandReply:
        try:
            replaced = await self.delete_session(call.channel, call.chat_id, call.args or None)
        except SessionBusy as busy:
            return tr(call.locale, busy.reason)
        if replaced is None:
            if call.args:
                return tr(call.locale, Msg.NO_SUCH_SESSION, name=call.args)
            return tr(call.locale, Msg.NOTHING_TO_DELETE)
        if replaced.fresh is not None:
            return tr(call.locale, Msg.DELETED_NOW_IN, old=replaced.old.id, new=replaced.fresh.id)
        return tr(call.locale, Msg.DELETED, old=replaced.old.id)

    async def compact(self, call: CommandCall) -> CommandReply:
        if self.compact_hook is None:
            return tr(call.locale, Msg.COMPACT_UNAVAILABLE)
        record = await self.store.active_session(call.channel, call.chat_id)
        if record is None:
            return tr(call.locale, Msg.NOTHING_TO_COMPACT)
        if not self.compact_hook(call.item, record.id):
            return tr(call.locale, Msg.COMPACT_BUSY)
        return ANSWERED_ELSEWHERE

    async def status(self, call: CommandCall) -> CommandReply:
        stats = await self.store.session_stats(call.channel, call.chat_id)
        loc = call.locale
        if stats is None:
            return tr(loc, Msg.STATUS_NO_SESSION)
        running = self.sessions.is_busy(call.channel, call.chat_id)
        r = stats.record
        lines = [
            tr(loc, Msg.STATUS_SESSION, id=r.id, title=_title(loc, r.title)),
            tr(loc, Msg.STATUS_MESSAGES, count=stats.message_count, segment=r.segment),
            tr(
                loc,
                Msg.STATUS_TURNS,
                turns=r.user_turns,
                state=tr(loc, Msg.STATE_RUNNING if running else Msg.STATE_IDLE),
            ),
            tr(loc, Msg.STATUS_COMPACTED, when=r.compacted_at or tr(loc, Msg.NEVER)),
        ]
        if self.status_hook is not None:
            lines.append(self.status_hook(stats, call.channel, loc))
        if self.usage_hook is not None:
            lines.append(self.usage_hook(stats, call.channel, loc))
        return "\n".join(lines)
