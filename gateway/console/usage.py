"""The usage view: tokens (input, output, cache read, cache write), cost and
turns per local day (`time.timezone`) for the last N days, overall and by
agent, model, channel and user; the share of input tokens read from the
prompt cache; and every budget that applies, with how much of it is spent.

The numbers come from the usage log as `picobot usage` reads it (one row
per model call, storage/sql/spend.py); a turn is a distinct run id. The
budgets are the ones `Budgets.lines` says apply (as /usage, /limits and the
check before each call decide), spent as the running totals the check reads.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from aiohttp import web

from gateway.config.core import Config
from gateway.config.limits import Scope
from gateway.console.api import ConsoleError, Route, json_response
from gateway.spend.budget import SCOPES, TOTAL_KEY, Budgets
from gateway.spend.payer import local_days
from storage.sql.spend import TotalKey, UsageGroup
from storage.store import Store

__all__ = ["BREAKDOWNS", "UsageView"]

DEFAULT_DAYS: Final = 30
MAX_DAYS: Final = 366
TOP_KEYS: Final = 20  # per dimension; the rest summed as one row (key null)
MAX_BUDGET_KEYS: Final = 50  # per scope: those that spent the most this month
BREAKDOWNS: Final = ("agent", "model", "channel", "user")
NUMBERS: Final = (
    "calls",
    "turns",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cost",
)
_WHOLE: Final = re.compile(r"[0-9]{1,4}")

Numbers = dict[str, float]


@dataclass(frozen=True, slots=True)
class UsageView:
    store: Store
    budgets: Budgets
    currency: str | None  # the one currency of the models' prices; None: several, or none

    @classmethod
    def of(
        cls, store: Store, budgets: Budgets | None, config: Config, clock: Callable[[], datetime]
    ) -> UsageView:
        """`budgets`: the gateway's (None: one of its own, as `picobot limits` builds)."""
        if budgets is None:
            budgets = Budgets(store, config.limits, config.time.zone, clock)
        currencies = {m.prices.currency for m in config.models.values() if m.prices is not None}
        return cls(store, budgets, currencies.pop() if len(currencies) == 1 else None)

    def routes(self) -> Sequence[Route]:
        return [Route("GET", "/usage", self.usage)]

    async def usage(self, request: web.Request) -> web.StreamResponse:
        days = _days(request.query.get("days"))
        first, last = local_days(self.budgets.clock(), self.budgets.zone, days)
        dates = [(first + timedelta(days=n)).isoformat() for n in range(days)]
        spend = self.store.spend
        span = (dates[0], dates[-1], TOP_KEYS)
        per_day = _per_day(dates, await spend.usage_by("day", *span))
        breakdowns = {
            dimension: _breakdown(dates, per_day, await spend.usage_by(dimension, *span))
            for dimension in BREAKDOWNS
        }
        totals = _sum(per_day)
        return json_response(
            {
                "days": days,
                "first_day": dates[0],
                "last_day": dates[-1],
                "today": last.isoformat(),
                "timezone": self.budgets.zone.key,
                "currency": self.currency,
                "totals": {**totals, "cache_share": _cache_share(totals)},
                "series": [
                    {"day": day, **numbers} for day, numbers in zip(dates, per_day, strict=True)
                ],
                "breakdowns": breakdowns,
                "budgets": await self._budgets(),
            }
        )

    async def _budgets(self) -> list[dict[str, Any]]:
        """Each budget that applies: every scope's default (key "*"), and
        each key with its own budget or that spent this day or month (the
        `MAX_BUDGET_KEYS` that spent the most, per scope)."""
        budgets = self.budgets
        stored = await budgets.stored()  # also starts the totals of a scope new to a budget
        periods = budgets.periods()
        spend = self.store.spend
        pairs: list[tuple[Scope, str]] = []
        for scope in SCOPES:
            own = set(budgets.limits.overrides(scope)) | {o.key for o in stored if o.scope == scope}
            if scope != "total":
                own |= set(
                    await spend.totalled_keys(scope, [periods.day, periods.month], MAX_BUDGET_KEYS)
                )
            own.discard(TOTAL_KEY)
            pairs += [(scope, TOTAL_KEY), *((scope, key) for key in sorted(own))]
        lines = budgets.lines(pairs, stored)

        def default(scope: str, key: str) -> bool:  # a scope's default: no one's spending
            return key == TOTAL_KEY and scope != "total"

        keys: list[TotalKey] = sorted(
            {(x.scope, x.key, periods.key(x.field)) for x in lines if not default(x.scope, x.key)}
        )
        totals = await spend.totals(keys) if keys else {}
        rows: list[dict[str, Any]] = []
        for line in lines:
            spent: float | None = None
            if not default(line.scope, line.key):
                spent = line.spent(totals[(line.scope, line.key, periods.key(line.field))])
            percent = None
            if spent is not None:
                percent = 100 * spent / line.amount if line.amount else 100.0
            rows.append(
                {
                    "scope": line.scope,
                    "key": line.key,
                    "default": default(line.scope, line.key),
                    "field": line.field,
                    "period": "day" if line.field.startswith("daily") else "month",
                    "unit": "tokens" if line.tokens else "cost",
                    "limit": line.amount,
                    "spent": spent,
                    "percent": percent,
                    "resets_at": periods.ends(line.field).isoformat(),
                }
            )
        rows.sort(key=lambda r: (SCOPES.index(r["scope"]), not r["default"], -(r["percent"] or 0)))
        return rows


def _days(text: str | None) -> int:
    """The `days` query parameter: 1 to MAX_DAYS, DEFAULT_DAYS when absent."""
    if text is None:
        return DEFAULT_DAYS
    if not _WHOLE.fullmatch(text) or not 1 <= int(text) <= MAX_DAYS:
        raise ConsoleError(400, f"days must be a whole number from 1 to {MAX_DAYS}")
    return int(text)


def _numbers(group: UsageGroup | None = None) -> Numbers:
    if group is None:
        return dict.fromkeys(NUMBERS, 0)
    return {name: getattr(group, name) for name in NUMBERS}


def _sum(rows: Sequence[Numbers]) -> Numbers:
    return {name: sum(r[name] for r in rows) for name in NUMBERS}


def _tokens(numbers: Numbers) -> float:
    """What a budget counts: every input token (cached or not) and every output token."""
    return numbers["input_tokens"] + numbers["output_tokens"]


def _cache_share(numbers: Numbers) -> float | None:
    """The share of input tokens read from the prompt cache; None without input."""
    if not numbers["input_tokens"]:
        return None
    return numbers["cache_read_tokens"] / numbers["input_tokens"]


def _per_day(dates: Sequence[str], groups: Sequence[UsageGroup]) -> list[Numbers]:
    """One day's numbers per date of `dates` (zero for a day without calls)."""
    found = {g.day: _numbers(g) for g in groups}
    return [found.get(day) or _numbers() for day in dates]


def _breakdown(
    dates: Sequence[str], per_day: Sequence[Numbers], groups: Sequence[UsageGroup]
) -> list[dict[str, Any]]:
    """Each key's numbers over the days and its tokens, cost and turns each
    day, the most tokens first; what the top keys leave of each day (keys
    past TOP_KEYS) as a last row with key None."""
    index = {day: n for n, day in enumerate(dates)}
    daily: dict[str, list[Numbers]] = {}
    for g in groups:
        if g.day in index:
            daily.setdefault(g.key, [_numbers() for _ in dates])[index[g.day]] = _numbers(g)
    keyed: list[tuple[str | None, list[Numbers]]] = list(daily.items())
    keyed.sort(key=lambda kv: (-_tokens(_sum(kv[1])), kv[0] or ""))
    rest = [
        {name: max(0, day[name] - sum(days[n][name] for _, days in keyed)) for name in NUMBERS}
        for n, day in enumerate(per_day)
    ]
    if _sum(rest)["calls"]:
        keyed.append((None, rest))
    return [
        {
            "key": key,
            **_sum(days),
            "days": {
                "tokens": [_tokens(d) for d in days],
                "cost": [d["cost"] for d in days],
                "turns": [d["turns"] for d in days],
            },
        }
        for key, days in keyed
    ]
