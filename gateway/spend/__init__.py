"""Spend control (docs/limits.md#budgets): budgets per sender, chat, agent and
deployment, per day and per month. `payer` names who pays for the model calls
made inside it, `provider` checks and charges each call, `budget` decides
which budgets apply and sends the notices, `parsing` checks what an admin
types to change one, `commands` are /usage and /limits,
`setup` builds the parts for the root in one call.

Public: gateway.spend.setup, gateway.spend.payer, gateway.spend.budget, gateway.spend.parsing
May import: agent, gateway.bus, gateway.commands, gateway.config, gateway.i18n, gateway.ops, storage
"""
