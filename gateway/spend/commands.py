"""/usage and /limits (docs/limits.md#budgets).

/usage shows the caller's spending today and this month against the budgets
that apply to them (their own and their chat's); an admin may name anyone
(`/usage telegram:42`). /limits lists the budgets that apply in the chat;
admins change them at run time (`/limits set|clear …`), stored in the
database so that they outlive a restart, through the same `Budgets.set` and
`Budgets.clear` as `picobot limits`. Every change is logged with who made it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import structlog

from gateway.bus import InboundMessage
from gateway.commands import Command, CommandCall, CommandRegistry, CommandReply
from gateway.config.limits import Scope
from gateway.i18n import Locale, Msg, tr
from gateway.spend.budget import Budgets, Line, amount_text
from gateway.spend.parsing import parse_field, parse_key, parse_scope, parse_value, value_text
from gateway.spend.payer import Payer
from storage.sql.spend import Total

__all__ = ["SpendCommands"]

log = structlog.get_logger(__name__)

_WHOSE = {
    "sender": Msg.WHOSE_SENDER,
    "chat": Msg.WHOSE_CHAT,
    "agent": Msg.WHOSE_AGENT,
    "total": Msg.WHOSE_TOTAL,
}


class SpendCommands:
    def __init__(
        self,
        budgets: Budgets,
        registry: CommandRegistry,
        is_admin: Callable[[InboundMessage], bool],
        agents: Sequence[str] | None = None,
    ) -> None:
        """`agents`: the names an agent budget may be set for (None: any)."""
        self.budgets = budgets
        self.is_admin = is_admin
        self.agents = agents
        registry.add(Command("usage", Msg.HELP_USAGE, self.usage))
        registry.add(Command("limits", Msg.HELP_LIMITS, self.limits))

    def _payer(self, call: CommandCall) -> Payer:
        m = call.item.message
        return Payer(m.channel, m.chat_id, m.sender_id, self.is_admin(m), call.locale)

    async def usage(self, call: CommandCall) -> CommandReply:
        loc = call.locale
        payer = self._payer(call)
        who = call.args.strip()
        if who and who != payer.sender_key:
            if not payer.admin:
                return tr(loc, Msg.USAGE_ONLY_ADMINS)
            channel, _, sender = who.partition(":")
            if not sender:
                return tr(loc, Msg.LIMITS_USAGE)
            payer = Payer(channel, "", sender, locale=loc)  # their own budgets, no chat
        return await self.report(payer, loc)

    async def report(self, payer: Payer, loc: Locale) -> str:
        periods = self.budgets.periods()
        lines, _, _ = await self.budgets.state(payer, None, self.budgets.clock())
        spend, first = self.budgets.store.spend, periods.date[:8] + "01"
        # from the log: a scope without a budget keeps no totals
        scopes: list[tuple[Scope, str, tuple[Total, Total]]] = [
            (
                "sender",
                payer.sender_key,
                await spend.sender_spent(payer.channel, payer.sender_id, first, periods.date),
            )
        ]
        if payer.chat_id:
            chat = await spend.chat_spent(payer.channel, payer.chat_id, first, periods.date)
            scopes.append(("chat", payer.chat_key, chat))
        out = [tr(loc, Msg.USAGE_HEADER, who=payer.sender_key, date=periods.date)]
        for scope, key, (day, month) in scopes:
            out.append(
                tr(
                    loc,
                    Msg.USAGE_SCOPE,
                    scope=key,
                    day_tokens=day.tokens,
                    day_cost=f"{day.cost:.4g}",
                    month_tokens=month.tokens,
                    month_cost=f"{month.cost:.4g}",
                )
            )
            for line in (x for x in lines if x.scope == scope):
                out.append(
                    self._budget_line(loc, line, day if line.field.startswith("daily") else month)
                )
        if not any(x.scope in ("sender", "chat") for x in lines):
            out.append(tr(loc, Msg.USAGE_NO_BUDGETS))
        return "\n".join(out)

    @staticmethod
    def _budget_line(loc: Locale, line: Line, total: Total) -> str:
        spent = line.spent(total)
        pct = round(100 * spent / line.amount) if line.amount else 100
        return tr(
            loc,
            Msg.USAGE_BUDGET,
            period=tr(
                loc, Msg.PERIOD_DAILY if line.field.startswith("daily") else Msg.PERIOD_MONTHLY
            ),
            whose=tr(loc, _WHOSE[line.scope]),
            spent=amount_text(loc, line.tokens, spent),
            amount=amount_text(loc, line.tokens, line.amount),
            pct=pct,
        )

    async def limits(self, call: CommandCall) -> CommandReply:
        loc = call.locale
        words = call.args.split()
        action, rest = (words[0].lower(), words[1:]) if words else ("", [])
        payer = self._payer(call)
        if not action:
            lines, _, _ = await self.budgets.state(payer, None, self.budgets.clock())
            if not lines:
                return tr(loc, Msg.LIMITS_NONE)
            shown = [
                tr(
                    loc,
                    Msg.LIMITS_LINE,
                    scope=x.scope,
                    key=x.key,
                    field=x.field,
                    value=value_text(x.field, x.amount),
                )
                for x in lines
            ]
            return "\n".join([tr(loc, Msg.LIMITS_HEADER), *shown])
        if action not in ("set", "clear"):
            return tr(loc, Msg.LIMITS_USAGE)
        if not payer.admin:
            return tr(loc, Msg.LIMITS_ONLY_ADMINS)
        by = payer.sender_key
        try:
            if action == "set":
                scope_text, key, field_text, text = rest
                scope, field = parse_scope(scope_text), parse_field(field_text)
                key = parse_key(scope, key, self.agents)
                value = parse_value(field, text)
                await self.budgets.set(scope, key, field, value, by)
                return tr(
                    loc, Msg.LIMITS_SET, scope=scope, key=key, field=field,
                    value=value_text(field, value),
                )  # fmt: skip
            scope_text, key, *named = rest
            if len(named) > 1:
                raise ValueError("too many words")
            scope = parse_scope(scope_text)
            key = parse_key(scope, key, None)  # a stored one goes whatever its key
            count = await self.budgets.clear(
                scope, key, parse_field(named[0]) if named else None, by
            )
        except ValueError:  # the problem's own line is English: the usage, in theirs
            return tr(loc, Msg.LIMITS_USAGE)
        if not count:
            return tr(loc, Msg.LIMITS_NOTHING_TO_CLEAR, scope=scope, key=key)
        return tr(loc, Msg.LIMITS_CLEARED, scope=scope, key=key, count=count)
