"""Spend control's parts, built for the composition root: the `Budgets`, the
provider wrapper every agent's calls go through, and /usage and /limits."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from agent.messages import Usage
from agent.providers.base import LLMProvider
from gateway.bus import InboundMessage, OutboundMessage
from gateway.commands import CommandRegistry
from gateway.config.agents import model_costs
from gateway.config.core import Config
from gateway.i18n import Locale
from gateway.ops.metrics import Metrics
from gateway.spend.budget import Budgets
from gateway.spend.commands import SpendCommands
from gateway.spend.provider import ChargedProvider
from storage.sql.spend import Call
from storage.store import Store

__all__ = ["SpendFeature"]


@dataclass(frozen=True, slots=True)
class SpendFeature:
    budgets: Budgets
    cost_of: Callable[[str, Usage], float | None]
    agents: tuple[str, ...]  # the names an agent budget may be set for

    @classmethod
    def build(
        cls,
        config: Config,
        store: Store,
        clock: Callable[[], datetime],
        wake: Callable[[str], None],
        locale_of: Callable[[str], Locale],
        metrics: Metrics,
    ) -> SpendFeature:
        """Notices go through the outbox (`wake`: one is there); the admin
        chat's in its channel's language."""

        async def notify(message: OutboundMessage) -> None:
            await store.enqueue(message)
            wake(message.channel)

        def spent(call: Call) -> None:
            metrics.spend(call.agent, call.channel, call.model, call.tokens, call.cost)

        limits = config.limits
        admin = limits.admin_chat
        budgets = Budgets(
            store,
            limits,
            config.time.zone,
            clock,
            notify=notify,
            admin_locale=locale_of(admin.channel) if admin is not None else Locale.EN,
            on_spend=spent,
            on_refused=lambda line: metrics.budget_refused(line.scope, line.field),
        )
        return cls(budgets, model_costs(config.models), tuple(config.agents))

    async def prepare(self) -> None:
        """Before the first turn: the totals of every scope with a budget."""
        await self.budgets.prepare()

    def charged(self, provider: LLMProvider, agent: str) -> LLMProvider:
        """`provider` as agent `agent`'s calls go through it: checked and charged."""
        return ChargedProvider(provider, self.budgets, agent, self.cost_of)

    def add_commands(
        self, registry: CommandRegistry, is_admin: Callable[[InboundMessage], bool]
    ) -> None:
        SpendCommands(self.budgets, registry, is_admin, self.agents)
