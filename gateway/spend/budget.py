"""Budgets: how much a sender, a chat, an agent and the whole deployment may
spend per day and per month (`limits`, docs/limits.md#budgets).

Every model call is charged as it returns (`charge`): one transaction logs
it and adds it to the day's and month's totals of its sender, chat, agent and
the deployment (storage/sql/spend.py), for each of those scopes that has a
budget; a scope that gets its first budget has its totals summed from the log
first (`_total`). Without any budget the log row joins the next commit,
unwaited. A turn is checked before
it starts (the access gate) and before each model call (`check`, through
gateway.spend.provider): once a total reaches its budget, no further call is
made for that payer until the period ends. Because each call is checked
against what was committed before it, turns running at the same time can
overshoot a budget by at most the call each has in flight.

Which budget applies: `limits.<scope>` is the default, a run-time default
(`/limits set <scope> * …`, key "*") replaces it, `limits.users` /
`limits.chats` replace it for one sender or chat, and a run-time budget for
that one key wins over all. A field set to null means no limit.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import structlog

from agent.messages import Usage
from gateway.bus import OutboundMessage
from gateway.config.limits import BUDGET_FIELDS, BudgetField, LimitsConfig, Scope
from gateway.i18n import Locale, Msg, tr
from gateway.spend.payer import Payer, Periods
from storage.sql.spend import Call, Override, Total, TotalKey
from storage.store import Store

__all__ = ["SCOPES", "Budgets", "Line", "OverBudget", "amount_text", "payer_pairs", "scope_key"]

log = structlog.get_logger(__name__)

SCOPES: tuple[Scope, ...] = ("sender", "chat", "agent", "total")
STORED_TTL_SECS = 5.0  # how stale the run-time budgets may be (set by another process)
TOTAL_KEY = "*"  # the one key of the total scope, and a scope's run-time default

Notify = Callable[[OutboundMessage], Awaitable[None]]


def scope_key(scope: Scope, payer: Payer, agent: str | None) -> str | None:
    """Whom `payer` is in `scope`; None when not known (a compaction has no
    sender, memory maintenance no chat, a gate check no agent yet)."""
    match scope:
        case "sender":
            return payer.sender_key if payer.sender_id else None
        case "chat":
            return payer.chat_key if payer.chat_id else None
        case "agent":
            return agent or None
    return TOTAL_KEY


def payer_pairs(payer: Payer, agent: str | None) -> list[tuple[Scope, str]]:
    """(scope, key) of each scope `payer` is known in."""
    keys = ((s, scope_key(s, payer, agent)) for s in SCOPES)
    return [(s, k) for s, k in keys if k is not None]


@dataclass(frozen=True, slots=True)
class Line:
    """One budget that applies: `amount` of `field` for `key` in `scope`."""

    scope: Scope
    key: str
    field: BudgetField
    amount: float

    @property
    def tokens(self) -> bool:
        return self.field.endswith("tokens")

    def spent(self, total: Total) -> float:
        return total.tokens if self.tokens else total.cost

    def log_fields(self) -> dict[str, object]:
        return {"scope": self.scope, "key": self.key, "field": self.field, "amount": self.amount}


def amount_text(locale: Locale, tokens: bool, value: float) -> str:
    if tokens:
        return tr(locale, Msg.AMOUNT_TOKENS, n=int(value))
    return tr(locale, Msg.AMOUNT_COST, cost=f"{value:.4g}")


def _when(moment: datetime, zone: ZoneInfo) -> str:
    return f"{moment.astimezone(zone):%Y-%m-%d %H:%M} ({zone.key})"


_WHOSE = {
    "sender": Msg.WHOSE_SENDER,
    "chat": Msg.WHOSE_CHAT,
    "agent": Msg.WHOSE_AGENT,
    "total": Msg.WHOSE_TOTAL,
}


def _budget_words(locale: Locale, line: Line, spent: float) -> dict[str, str]:
    daily = line.field.startswith("daily")
    return {
        "whose": tr(locale, _WHOSE[line.scope]),
        "period": tr(locale, Msg.PERIOD_DAILY if daily else Msg.PERIOD_MONTHLY),
        "amount": amount_text(locale, line.tokens, line.amount),
        "spent": amount_text(locale, line.tokens, spent),
    }


@dataclass(frozen=True, slots=True)
class OverBudget:
    """The budget a payer has used up, and when it starts afresh."""

    line: Line
    spent: float
    resets_at: datetime
    zone: ZoneInfo

    def text(self, locale: Locale) -> str:
        words = _budget_words(locale, self.line, self.spent)
        return tr(locale, Msg.BUDGET_EXCEEDED, resets=_when(self.resets_at, self.zone), **words)


class Budgets:
    def __init__(
        self,
        store: Store,
        limits: LimitsConfig,
        zone: ZoneInfo,
        clock: Callable[[], datetime],
        *,
        notify: Notify | None = None,
        admin_locale: Locale = Locale.EN,
        on_spend: Callable[[Call], None] | None = None,
        on_refused: Callable[[Line], None] | None = None,
    ) -> None:
        """`notify`: puts a notice in the outbox (user and admin notices; None: none)."""
        self.store = store
        self.limits = limits
        self.zone = zone
        self.clock = clock
        self.notify = notify
        self.admin_locale = admin_locale
        self.on_spend = on_spend
        self.on_refused = on_refused
        self._stored: list[Override] | None = None
        self._configured = limits.has_budgets
        self._totalled: set[Scope] = set()  # scopes whose totals are kept (prepare, stored)
        # charges queued without waiting (no budget to check): kept until they commit
        self._inflight: set[asyncio.Future[Any]] = set()
        self._stored_at = 0.0

    def periods(self, now: datetime | None = None) -> Periods:
        return Periods.of(now or self.clock(), self.zone)

    # -- which budgets apply ---------------------------------------------------------
    def lines(self, pairs: Sequence[tuple[Scope, str]], stored: Sequence[Override]) -> list[Line]:
        """The budgets of each (scope, key) in `pairs`, from the config and `stored`."""
        runtime = {(o.scope, o.key, o.field): o.value for o in stored}
        out: list[Line] = []
        for scope, key in pairs:
            values: dict[BudgetField, float | None] = self.limits.defaults(scope).values()
            for name in BUDGET_FIELDS:
                if (scope, TOTAL_KEY, name) in runtime:
                    values[name] = runtime[(scope, TOTAL_KEY, name)]
            own = self.limits.overrides(scope).get(key)
            if own is not None:
                values.update({n: getattr(own, n) for n in own.model_fields_set})  # type: ignore[misc]
            for name in BUDGET_FIELDS:
                if (scope, key, name) in runtime:
                    values[name] = runtime[(scope, key, name)]
            out += [Line(scope, key, n, v) for n, v in values.items() if v is not None]
        return out

    async def stored(self) -> list[Override]:
        """The budgets set at run time, read at most every `STORED_TTL_SECS`
        (one set here is seen at once; one `picobot limits` set, within that).
        A scope that has a budget for the first time gets its totals summed
        from the log before anything reads them."""
        now = time.monotonic()
        if self._stored is None or now - self._stored_at >= STORED_TTL_SECS:
            self._stored = await self.store.spend.overrides()
            self._stored_at = now
            await self._total(self._budgeted(self._stored))
        return self._stored

    def _budgeted(self, stored: Sequence[Override]) -> set[Scope]:
        """The scopes that may have a budget: in the file or set at run time."""
        scopes = {o.scope for o in stored if o.scope in SCOPES}
        for scope in SCOPES:
            if self.limits.overrides(scope) or any(
                v is not None for v in self.limits.defaults(scope).values().values()
            ):
                scopes.add(scope)
        return scopes

    async def _total(self, scopes: set[Scope]) -> None:
        """Keep totals for `scopes` from now on, those new to it summed from the
        log first (their calls were logged but not totalled until now)."""
        new = sorted(scopes - self._totalled)
        if not new:
            return
        periods = self.periods()
        month_start = periods.date[:8] + "01"
        spans = [
            (periods.day, periods.date, periods.date),
            (periods.month, month_start, periods.date),
        ]
        # totalled from now: a charge made while the sums run is added after
        # them (one writer, in order); one made before is in the log they sum
        self._totalled |= set(new)
        try:
            await self.store.spend.rebuild_totals(new, spans, self.clock())
        except BaseException:
            self._totalled -= set(new)  # summed again at the next read
            raise
        log.info("budget_totals_rebuilt", scopes=new)

    async def prepare(self) -> None:
        """At start: the totals of every scope with a budget, from the log."""
        self._stored = None
        await self.stored()

    async def _any(self) -> bool:
        """Whether any budget is set, in the file or at run time (else checking
        costs nothing: the common case)."""
        return self._configured or bool(await self.stored())

    def _total_key(self, line: Line, periods: Periods) -> TotalKey:
        return (line.scope, line.key, periods.key(line.field))

    async def state(
        self, payer: Payer, agent: str | None, now: datetime
    ) -> tuple[list[Line], dict[TotalKey, Total], Periods]:
        pairs = payer_pairs(payer, agent)
        lines = self.lines(pairs, await self.stored())
        periods = self.periods(now)
        keys = sorted({self._total_key(line, periods) for line in lines})
        totals = await self.store.spend.totals(keys) if keys else {}
        return lines, totals, periods

    # -- changing them at run time ------------------------------------------------------
    async def set(
        self, scope: Scope, key: str, field: BudgetField, value: float | None, by: str
    ) -> None:
        """A run-time budget (`value` None: no limit), stored; wins over the config."""
        await self.store.spend.set_override(scope, key, field, value, by, self.clock())
        self._stored = None
        await self.stored()
        log.info("budget_set", scope=scope, key=key, field=field, value=value, by=by)

    async def clear(self, scope: Scope, key: str, field: BudgetField | None, by: str) -> int:
        """Drop run-time budgets (one field, or all of scope and key): the config's apply."""
        count = await self.store.spend.clear_override(scope, key, field)
        self._stored = None
        log.info("budget_cleared", scope=scope, key=key, field=field, count=count, by=by)
        return count

    # -- checking -----------------------------------------------------------------------
    def exempt(self, payer: Payer) -> bool:
        return not payer.gated or (payer.admin and self.limits.admins_exempt)

    async def check(self, payer: Payer, agent: str | None = None) -> OverBudget | None:
        """The first budget `payer` has used up (agent: that agent's too); None
        while every one has room, or when the payer is exempt."""
        if self.exempt(payer) or not await self._any():
            return None
        now = self.clock()
        lines, totals, periods = await self.state(payer, agent, now)
        for line in lines:
            spent = line.spent(totals[self._total_key(line, periods)])
            if spent >= line.amount:
                log.info("budget_refused", spent=spent, **line.log_fields())
                if self.on_refused is not None:
                    self.on_refused(line)
                return OverBudget(line, spent, periods.ends(line.field), self.zone)
        return None

    # -- charging ----------------------------------------------------------------------
    async def charge(
        self, payer: Payer, agent: str, model: str, usage: Usage, cost: float | None
    ) -> None:
        """Count one model call for its payer: always in the log (what /usage
        and `picobot usage` read), in the totals of each scope with a budget."""
        now = self.clock()
        periods = self.periods(now)
        call = Call(
            payer.channel, payer.chat_id, payer.sender_id, agent, model, payer.kind,
            payer.run_id, periods.date, usage.input_tokens, usage.output_tokens,
            usage.cache_read_tokens, usage.cache_write_tokens, cost,
        )  # fmt: skip
        if self.on_spend is not None:
            self.on_spend(call)
        await self.stored()  # totals begin for a scope that just got a budget
        pairs = [(s, k) for s, k in payer_pairs(payer, agent) if s in self._totalled]
        keys = [(s, k, p) for s, k in pairs for p in (periods.day, periods.month)]
        if not keys:  # no budget anywhere: logged only, in the next commit, unwaited
            queued = self.store.spend.charge_soon(call, keys, now)
            if queued is not None:
                self._inflight.add(queued)
                queued.add_done_callback(self._charged)
                return
        moved = await self.store.spend.charge(call, keys, now)
        for line in self.lines(pairs, await self.stored()):
            before, after = moved[self._total_key(line, periods)]
            await self._crossed(line, line.spent(before), line.spent(after), payer, periods)

    async def drained(self) -> None:
        """Until the charges queued without waiting have committed."""
        await asyncio.gather(*self._inflight, return_exceptions=True)

    def _charged(self, future: asyncio.Future[Any]) -> None:
        """A charge that joined a group commit, done (its failure is logged)."""
        self._inflight.discard(future)
        if not future.cancelled() and (failed := future.exception()) is not None:
            log.error("spend_charge_failed", error=f"{type(failed).__name__}: {failed}")

    async def _crossed(
        self, line: Line, before: float, after: float, payer: Payer, periods: Periods
    ) -> None:
        """One notice per line crossed: the payer's chat near its own or its
        chat's budget, the admin chat when any budget is used up."""
        near = line.amount * self.limits.notice_ratio
        if before < near <= after < line.amount and line.scope in ("sender", "chat"):
            words = _budget_words(payer.locale, line, after)
            percent = round(100 * after / line.amount) if line.amount else 100
            text = tr(
                payer.locale,
                Msg.BUDGET_NEAR,
                pct=percent,
                resets=_when(periods.ends(line.field), self.zone),
                **words,
            )
            log.info("budget_near", spent=after, **line.log_fields())
            await self._send(OutboundMessage(payer.channel, payer.chat_id, text))
        if before < line.amount <= after:
            log.warning("budget_reached", spent=after, **line.log_fields())
            admin = self.limits.admin_chat
            if admin is not None:
                locale = self.admin_locale
                text = tr(
                    locale,
                    Msg.BUDGET_ADMIN,
                    scope=line.scope,
                    key=line.key,
                    field=line.field,
                    resets=_when(periods.ends(line.field), self.zone),
                    **_budget_words(locale, line, after),
                )
                await self._send(OutboundMessage(admin.channel, admin.chat_id, text))

    async def _send(self, message: OutboundMessage) -> None:
        if self.notify is None:
            return
        try:
            await self.notify(message)
        except Exception:  # a notice is worth a log line, never a turn
            log.exception("budget_notice_failed", channel=message.channel)
