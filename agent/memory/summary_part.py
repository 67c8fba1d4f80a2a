"""The context part that gives the model its user's memory summary.

Only the sender's own summary (never another user's), and only in a private
chat: in a group the other members would read it in the replies. Rendered
into the turn's tail (agent.context), so the cached prefix stays the same.
"""

from __future__ import annotations

from typing import Protocol

from agent.context import TurnFacts
from agent.memory.types import MemoryScope
from agent.messages import Marker

__all__ = ["MemorySummaryPart", "SummarySource"]


class SummarySource(Protocol):
    async def summary(self, scope: MemoryScope) -> str | None: ...


class MemorySummaryPart:
    def __init__(self, source: SummarySource) -> None:
        self.name = "memory_summary"
        self.marker: Marker | None = None  # rendered per turn, never persisted
        self._source = source

    async def render(self, turn: TurnFacts) -> str | None:
        if not turn.private:
            return None
        summary = await self._source.summary(MemoryScope.of_user(turn.channel, turn.sender_id))
        if not summary:
            return None
        return (
            "What you remember about this user (a summary; use memory_search for details):\n"
            + summary
        )
