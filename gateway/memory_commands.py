"""/memory and /forget: what picobot keeps about the sender, and deleting it.

Both act on the sender's own scope only (channel + sender id, as the memory
tools do). `/forget all` deletes every entry, the audit trail and the summary,
then rewrites AGENT.md's block without that user's section.
"""

from __future__ import annotations

from typing import Final

from agent.memory.types import MemoryScope
from gateway.commands import Command, CommandCall, CommandRegistry, CommandReply
from gateway.memory_service import SummaryFile, scope_of
from storage.memory_store import MemoryStore

__all__ = ["MemoryCommands"]

FORGET_USAGE: Final = "Usage: /forget NAMESPACE/KEY (as /memory shows it) or /forget all"
_SHOWN: Final = 50
_PREVIEW: Final = 120


class MemoryCommands:
    def __init__(
        self, store: MemoryStore, summary_file: SummaryFile, registry: CommandRegistry
    ) -> None:
        self.store = store
        self.summary_file = summary_file
        registry.add(Command("memory", "what I remember about you", self.memory))
        registry.add(Command("forget", "/forget NAMESPACE/KEY | all: delete it", self.forget))

    @staticmethod
    def _scope(call: CommandCall) -> MemoryScope:
        m = call.item.message
        return MemoryScope.of_user(m.channel, m.sender_id)

    async def memory(self, call: CommandCall) -> CommandReply:
        scope = scope_of(self._scope(call))
        rows = await self.store.entries(scope, None)
        summary = await self.store.summary(scope)
        if not rows and not summary:
            return "I keep no memories about you."
        lines = [f"I remember {len(rows)} thing(s) about you:"]
        for row in rows[:_SHOWN]:
            text = row.content if len(row.content) <= _PREVIEW else row.content[:_PREVIEW] + "…"
            lines.append(f"- {row.namespace}/{row.memory_key}: {text}")
        if len(rows) > _SHOWN:
            lines.append(f"… and {len(rows) - _SHOWN} more")
        if summary:
            lines += ["", "Summary:", summary]
        lines += ["", "/forget NAMESPACE/KEY deletes one, /forget all deletes everything."]
        return "\n".join(lines)

    async def forget(self, call: CommandCall) -> CommandReply:
        scope = scope_of(self._scope(call))
        target = call.args.strip()
        if target.lower() == "all":
            count = await self.store.forget(scope)
            await self.summary_file.refresh()
            return f"Forgot everything about you ({count} memories and the summary)."
        namespace, sep, key = target.partition("/")
        if not sep or not namespace or not key:
            return FORGET_USAGE
        if await self.store.delete(scope, namespace, key):
            return f"Forgot {namespace}/{key}."
        return f"I have no memory {namespace}/{key} about you."
