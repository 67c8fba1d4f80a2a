"""/memory and /forget: what picobot keeps about the sender, and deleting it.

Both act on the sender's own scope only (channel + sender id, as the memory
tools do). `/forget all` deletes every entry, the audit trail and the summary,
then rewrites AGENT.md's block without that user's section (`forget_all`,
which the console's people view uses too).
"""

from __future__ import annotations

from typing import Final

from agent.memory.types import MemoryScope
from gateway.commands import Command, CommandCall, CommandRegistry, CommandReply
from gateway.i18n import Msg, tr
from gateway.memory.service import SummaryFile, scope_of
from storage.sql.memory.memories import Scope
from storage.units.memories import MemoryStore

__all__ = ["MemoryCommands", "forget_all"]

_SHOWN: Final = 50
_PREVIEW: Final = 120


async def forget_all(store: MemoryStore, summary_file: SummaryFile, scope: Scope) -> int:
    """Every entry, the audit trail and the summary of `scope` deleted, then
    AGENT.md's block rewritten without it (`/forget all`, the console); how
    many entries there were."""
    count = await store.forget(scope)
    await summary_file.refresh()
    return count


class MemoryCommands:
    def __init__(
        self, store: MemoryStore, summary_file: SummaryFile, registry: CommandRegistry
    ) -> None:
        self.store = store
        self.summary_file = summary_file
        registry.add(Command("memory", Msg.HELP_MEMORY, self.memory))
        registry.add(Command("forget", Msg.HELP_FORGET, self.forget))

    @staticmethod
    def _scope(call: CommandCall) -> MemoryScope:
        m = call.item.message
        return MemoryScope.of_user(m.channel, m.sender_id)

    async def memory(self, call: CommandCall) -> CommandReply:
        scope = scope_of(self._scope(call))
        rows = await self.store.entries(scope, None)
        summary = await self.store.summary(scope)
        loc = call.locale
        if not rows and not summary:
            return tr(loc, Msg.MEMORY_NONE)
        lines = [tr(loc, Msg.MEMORY_HEADER, count=len(rows))]
        for row in rows[:_SHOWN]:
            text = row.content if len(row.content) <= _PREVIEW else row.content[:_PREVIEW] + "…"
            lines.append(f"- {row.namespace}/{row.memory_key}: {text}")
        if len(rows) > _SHOWN:
            lines.append(tr(loc, Msg.MEMORY_MORE, count=len(rows) - _SHOWN))
        if summary:
            lines += ["", tr(loc, Msg.MEMORY_SUMMARY), summary]
        lines += ["", tr(loc, Msg.MEMORY_FOOTER)]
        return "\n".join(lines)

    async def forget(self, call: CommandCall) -> CommandReply:
        scope = scope_of(self._scope(call))
        target = call.args.strip()
        if target.lower() == "all":
            count = await forget_all(self.store, self.summary_file, scope)
            return tr(call.locale, Msg.FORGOT_ALL, count=count)
        namespace, sep, key = target.partition("/")
        if not sep or not namespace or not key:
            return tr(call.locale, Msg.FORGET_USAGE)
        name = f"{namespace}/{key}"
        if await self.store.delete(scope, namespace, key):
            return tr(call.locale, Msg.FORGOT, name=name)
        return tr(call.locale, Msg.FORGET_UNKNOWN, name=name)
