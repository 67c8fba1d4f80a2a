"""The memory-summary context part: the sender's own summary, private chats only."""

from __future__ import annotations

from agent.context import TurnFacts
from agent.memory.summary_part import MemorySummaryPart
from agent.memory.types import MemoryScope


class Summaries:
    async def summary(self, scope: MemoryScope) -> str | None:
        return {"feishu:u1": "- likes tea"}.get(scope.key)


async def test_only_the_senders_summary_and_only_in_a_private_chat() -> None:
    part = MemorySummaryPart(Summaries())
    mine = await part.render(TurnFacts("s", "feishu", "c", "u1", "default", private=True))
    assert mine is not None
    assert mine.endswith("- likes tea")
    assert await part.render(TurnFacts("s", "feishu", "c", "u2", "default", private=True)) is None
    assert await part.render(TurnFacts("s", "feishu", "g", "u1", "default", private=False)) is None
    assert await part.render(TurnFacts("s", "telegram", "c", "u1", "default", private=True)) is None
