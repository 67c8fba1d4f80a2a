"""ChargedProvider: the agent's provider as the runtime hands it to turns,
checking the payer's budgets before each call and charging the call to them
after it (gateway.spend.budget). The payer is whoever the surrounding code
named with `paying` (gateway.spend.payer): the turn's sender and chat for the
turn and its sub-agents, the chat for a compaction, the user for memory
maintenance.

It wraps the whole of an agent's provider, fallbacks included, so a call is
checked once and charged at the prices of the model that answered.
"""

from __future__ import annotations

import asyncio

import structlog

from agent.providers.base import DeltaSink, LLMProvider, LLMRequest, LLMResponse
from agent.spend import CostOf, SpendRefused
from gateway.spend.budget import Budgets
from gateway.spend.payer import PAYER, UNKNOWN_PAYER

__all__ = ["ChargedProvider"]

log = structlog.get_logger(__name__)


class ChargedProvider:
    def __init__(self, inner: LLMProvider, budgets: Budgets, agent: str, cost_of: CostOf) -> None:
        self.inner = inner
        self.name = inner.name
        self.budgets = budgets
        self.agent = agent
        self.cost_of = cost_of

    async def complete(self, request: LLMRequest, on_delta: DeltaSink | None = None) -> LLMResponse:
        payer = PAYER.get() or UNKNOWN_PAYER
        over = await self.budgets.check(payer, self.agent)
        if over is not None:
            raise SpendRefused(over.text(payer.locale))
        response = await self.inner.complete(request, on_delta)
        usage = response.usage
        if usage is not None:
            model = response.model or request.model
            try:
                await self.budgets.charge(
                    payer, self.agent, model, usage, self.cost_of(model, usage)
                )
            except asyncio.CancelledError:
                raise
            except Exception:  # the answer is worth more than its bookkeeping
                log.exception("spend_charge_failed", agent=self.agent, model=model)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()
