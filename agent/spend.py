"""What a turn's model calls have spent, against the turn's caps.

One `TurnSpend` per turn, made by the agent loop from its settings and handed
to the turn's tools in `ToolContext.spend`; a sub-agent's loop (the `task`
tool) finds it there and counts into it, so sub-agents spend the remaining
budget of the turn that started them, not a fresh one of their own.
"""

from __future__ import annotations

from collections.abc import Callable

from agent.messages import Usage

__all__ = ["CostOf", "SpendRefused", "TurnSpend"]

# (id of the model that answered, its usage) → cost; None: that model has no prices
CostOf = Callable[[str, Usage], float | None]


class SpendRefused(Exception):
    """A model call refused before it was made because whoever pays for it is
    over a budget (raised by the provider the runtime wraps around the agent's;
    gateway/spend/). `text` says so to the user, in their language: the turn
    ends with it as its reply, the transcript valid."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class TurnSpend:
    def __init__(
        self,
        max_tokens: int | None = None,
        max_cost: float | None = None,
        cost_of: CostOf | None = None,
    ) -> None:
        self.max_tokens = max_tokens
        self.max_cost = max_cost
        self.cost_of = cost_of
        self.tokens = 0
        self.cost = 0.0

    def add(self, model: str, usage: Usage | None) -> None:
        """One model call: its tokens (input + output) and their cost."""
        if usage is None:
            return
        self.tokens += usage.input_tokens + usage.output_tokens
        cost = self.cost_of(model, usage) if self.cost_of is not None else None
        self.cost += cost or 0.0

    def over(self) -> str | None:
        """Which cap the turn has reached, in words; None while under both."""
        if self.max_tokens is not None and self.tokens >= self.max_tokens:
            return (
                f"this request has used {self.tokens:,} tokens, over its cap of "
                f"{self.max_tokens:,} per turn"
            )
        if self.max_cost is not None and self.cost >= self.max_cost:
            return (
                f"this request has cost {self.cost:.4g}, over its cap of {self.max_cost:g} per turn"
            )
        return None
