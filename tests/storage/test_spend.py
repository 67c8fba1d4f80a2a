"""Spend (storage/sql/spend.py): running totals that hold across concurrent
charges and a reopened database, the per-call usage log and its report, the
budgets set at run time, and pruning."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime, timedelta

from storage.clock import iso
from storage.database import Database
from storage.sql.spend import Call, Override, Total, TotalKey, UsageDay, UsageGroup
from storage.store import Store
from tests.storage.conftest import OpenStorage

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
SENDER_DAY: TotalKey = ("sender", "telegram:42", "day:2026-03-01")
SENDER_MONTH: TotalKey = ("sender", "telegram:42", "month:2026-03")
TOTAL_DAY: TotalKey = ("total", "*", "day:2026-03-01")


def call(
    *,
    sender: str = "42",
    channel: str = "telegram",
    agent: str = "default",
    model: str = "m1",
    day: str = "2026-03-01",
    tokens: tuple[int, int, int, int] = (70, 30, 5, 2),
    cost: float | None = 0.25,
) -> Call:
    i, o, cr, cw = tokens
    return Call(
        channel, f"chat-{sender}", sender, agent, model, "turn", "run-1", day, i, o, cr, cw, cost
    )


async def log_rows(db: Database) -> list[tuple[str, str, int, float | None]]:
    found = await db.read(
        lambda c: c.execute(
            "SELECT at, sender_id, input_tokens, cost FROM usage_log ORDER BY id"
        ).fetchall()
    )
    return [
        (
            r["at"],
            r["sender_id"],
            int(r["input_tokens"]),
            None if r["cost"] is None else float(r["cost"]),
        )
        for r in found
    ]


async def test_charge_returns_each_total_before_and_after_and_logs_the_call(
    open_storage: OpenStorage,
) -> None:
    async with open_storage() as db:
        spend = Store(db).spend
        first = await spend.charge(call(), [SENDER_DAY, SENDER_MONTH], T0)
        assert first == {
            SENDER_DAY: (Total(0, 0.0), Total(100, 0.25)),
            SENDER_MONTH: (Total(0, 0.0), Total(100, 0.25)),
        }
        later = T0 + timedelta(minutes=1)
        second = await spend.charge(
            call(tokens=(40, 10, 0, 0), cost=0.5), [SENDER_DAY, TOTAL_DAY], later
        )
        assert second == {
            SENDER_DAY: (Total(100, 0.25), Total(150, 0.75)),
            TOTAL_DAY: (Total(0, 0.0), Total(50, 0.5)),
        }
        assert await log_rows(db) == [(iso(T0), "42", 70, 0.25), (iso(later), "42", 40, 0.5)]
        assert await spend.totals([SENDER_DAY, SENDER_MONTH, TOTAL_DAY]) == {
            SENDER_DAY: Total(150, 0.75),
            SENDER_MONTH: Total(100, 0.25),
            TOTAL_DAY: Total(50, 0.5),
        }


async def test_a_call_without_prices_counts_its_tokens_and_no_cost(
    open_storage: OpenStorage,
) -> None:
    async with open_storage() as db:
        spend = Store(db).spend
        moved = await spend.charge(call(cost=None), [SENDER_DAY], T0)
        assert moved[SENDER_DAY] == (Total(0, 0.0), Total(100, 0.0))
        assert await log_rows(db) == [(iso(T0), "42", 70, None)]


async def test_before_is_exactly_the_previous_after_for_cost(open_storage: OpenStorage) -> None:
    """A line is crossed when before < line <= after: a `before` that differs
    from the total the previous charge left (float rounding) sees a line
    crossed twice, or never. 0.01 + 0.01 = 0.02; the third call's before must
    be 0.02, not 0.019999999999999997."""
    async with open_storage() as db:
        spend = Store(db).spend
        afters = []
        befores = []
        for n in range(3):
            moved = await spend.charge(call(cost=0.01), [SENDER_DAY], T0 + timedelta(seconds=n))
            befores.append(moved[SENDER_DAY][0].cost)
            afters.append(moved[SENDER_DAY][1].cost)
        assert befores == [0.0, *afters[:2]]
        crossed = [b < 0.02 <= a for b, a in zip(befores, afters, strict=True)]
        assert crossed == [False, True, False]


async def test_concurrent_charges_add_up_and_one_of_them_crosses_a_line(
    open_storage: OpenStorage,
) -> None:
    async with open_storage() as db:
        spend = Store(db).spend
        outcomes = await asyncio.gather(
            *(spend.charge(call(), [SENDER_DAY, TOTAL_DAY], T0) for _ in range(40))
        )
        assert await spend.totals([SENDER_DAY, TOTAL_DAY]) == {
            SENDER_DAY: Total(4000, 10.0),
            TOTAL_DAY: Total(4000, 10.0),
        }
        rows = await log_rows(db)
    assert len(rows) == 40
    for key in (SENDER_DAY, TOTAL_DAY):
        crossed_tokens = [o for o in outcomes if o[key][0].tokens < 2050 <= o[key][1].tokens]
        crossed_cost = [o for o in outcomes if o[key][0].cost < 5.0 <= o[key][1].cost]
        assert len(crossed_tokens) == 1
        assert len(crossed_cost) == 1
        afters = sorted(o[key][1].tokens for o in outcomes)
        assert afters == [100 * n for n in range(1, 41)]  # each saw its own step


async def test_a_key_never_charged_totals_zero(open_storage: OpenStorage) -> None:
    async with open_storage() as db:
        spend = Store(db).spend
        await spend.charge(call(), [SENDER_DAY], T0)
        other: TotalKey = ("sender", "telegram:7", "day:2026-03-01")
        assert await spend.totals([other, SENDER_MONTH]) == {
            other: Total(0, 0.0),
            SENDER_MONTH: Total(0, 0.0),
        }
        assert await spend.totals([]) == {}


async def test_overrides_are_set_replaced_listed_and_cleared(open_storage: OpenStorage) -> None:
    later = T0 + timedelta(hours=1)
    async with open_storage() as db:
        spend = Store(db).spend
        await spend.set_override("sender", "telegram:42", "daily_tokens", 100, "admin:1", T0)
        await spend.set_override("sender", "telegram:42", "monthly_cost", None, "admin:1", T0)
        await spend.set_override("sender", "*", "daily_tokens", 5000, "admin:1", T0)
        await spend.set_override("chat", "telegram:c", "daily_cost", 1.5, "admin:1", T0)
        await spend.set_override("sender", "telegram:42", "daily_tokens", 200, "admin:2", later)

        assert await spend.overrides() == [
            Override("chat", "telegram:c", "daily_cost", 1.5, "admin:1", iso(T0)),
            Override("sender", "*", "daily_tokens", 5000.0, "admin:1", iso(T0)),
            Override("sender", "telegram:42", "daily_tokens", 200.0, "admin:2", iso(later)),
            Override("sender", "telegram:42", "monthly_cost", None, "admin:1", iso(T0)),
        ]
        mine = await spend.overrides([("sender", "telegram:42"), ("sender", "*")])
        assert sorted(mine, key=lambda o: (o.key, o.field)) == [
            Override("sender", "*", "daily_tokens", 5000.0, "admin:1", iso(T0)),
            Override("sender", "telegram:42", "daily_tokens", 200.0, "admin:2", iso(later)),
            Override("sender", "telegram:42", "monthly_cost", None, "admin:1", iso(T0)),
        ]
        assert await spend.overrides([("agent", "default")]) == []

        assert await spend.clear_override("sender", "telegram:42", "daily_tokens") == 1
        assert await spend.clear_override("sender", "telegram:42", "daily_tokens") == 0
        assert [o.field for o in await spend.overrides([("sender", "telegram:42")])] == [
            "monthly_cost"
        ]
        await spend.set_override("sender", "telegram:42", "daily_cost", 2.0, "admin:1", T0)
        assert await spend.clear_override("sender", "telegram:42", None) == 2
        assert await spend.overrides([("sender", "telegram:42")]) == []
        remaining = await spend.overrides()
        assert [(o.scope, o.key) for o in remaining] == [("chat", "telegram:c"), ("sender", "*")]


async def test_usage_days_groups_by_day_agent_and_model_and_filters_by_sender(
    open_storage: OpenStorage,
) -> None:
    async with open_storage() as db:
        spend = Store(db).spend
        calls = [
            call(day="2026-02-28", tokens=(1, 1, 0, 0), cost=9.0),  # before `since`
            call(day="2026-03-01", tokens=(10, 1, 2, 3), cost=0.25),
            call(day="2026-03-01", tokens=(20, 2, 4, 6), cost=0.5),
            call(day="2026-03-01", model="m2", tokens=(5, 5, 0, 0), cost=None),
            call(day="2026-03-01", agent="coder", tokens=(7, 3, 1, 1), cost=0.125),
            call(day="2026-03-02", sender="7", tokens=(100, 50, 0, 0), cost=1.0),
            call(day="2026-03-02", channel="feishu", tokens=(3, 3, 0, 0), cost=0.0),
        ]
        for n, c in enumerate(calls):
            await spend.charge(c, [], T0 + timedelta(seconds=n))

        assert await spend.usage_days("2026-03-01") == [
            UsageDay("2026-03-01", "coder", "m1", 1, 7, 3, 1, 1, 0.125),
            UsageDay("2026-03-01", "default", "m1", 2, 30, 3, 6, 9, 0.75),
            UsageDay("2026-03-01", "default", "m2", 1, 5, 5, 0, 0, 0.0),
            UsageDay("2026-03-02", "default", "m1", 2, 103, 53, 0, 0, 1.0),
        ]
        assert await spend.usage_days("2026-03-01", channel="telegram", sender_id="42") == [
            UsageDay("2026-03-01", "coder", "m1", 1, 7, 3, 1, 1, 0.125),
            UsageDay("2026-03-01", "default", "m1", 2, 30, 3, 6, 9, 0.75),
            UsageDay("2026-03-01", "default", "m2", 1, 5, 5, 0, 0, 0.0),
        ]
        assert await spend.usage_days("2026-01-01", channel="feishu", sender_id="42") == [
            UsageDay("2026-03-02", "default", "m1", 1, 3, 3, 0, 0, 0.0),
        ]
        assert await spend.usage_days("2026-03-01", channel="telegram", sender_id="7") == [
            UsageDay("2026-03-02", "default", "m1", 1, 100, 50, 0, 0, 1.0),
        ]
        assert await spend.usage_days("2026-03-03") == []


async def test_usage_by_groups_each_day_by_a_dimension_and_counts_turns_by_run_id(
    open_storage: OpenStorage,
) -> None:
    """The console's report: a day's calls by agent, model, channel or user
    (an unknown sender is ""), the distinct run ids its turns; only the `top`
    keys with the most tokens over the span."""

    def run(c: Call, run_id: str | None) -> Call:
        return dataclasses.replace(c, run_id=run_id)

    async with open_storage() as db:
        spend = Store(db).spend
        calls = [
            run(call(day="2026-02-28", tokens=(1, 1, 0, 0)), "r0"),  # before the span
            run(call(day="2026-03-01", tokens=(10, 1, 2, 3), cost=0.25), "r1"),
            run(call(day="2026-03-01", tokens=(20, 2, 4, 6), cost=0.5), "r1"),  # one turn
            run(call(day="2026-03-01", model="m2", tokens=(5, 5, 0, 0), cost=None), "r2"),
            run(call(day="2026-03-01", sender="", tokens=(8, 0, 0, 0), cost=0.0), None),
            run(call(day="2026-03-02", channel="feishu", tokens=(3, 3, 1, 0), cost=1.0), "r3"),
            run(call(day="2026-03-03", tokens=(1, 1, 0, 0)), "r4"),  # after the span
        ]
        for n, c in enumerate(calls):
            await spend.charge(c, [], T0 + timedelta(seconds=n))

        span = ("2026-03-01", "2026-03-02", 10)
        assert await spend.usage_by("day", *span) == [
            UsageGroup("2026-03-01", "", 4, 2, 43, 8, 6, 9, 0.75),
            UsageGroup("2026-03-02", "", 1, 1, 3, 3, 1, 0, 1.0),
        ]
        assert await spend.usage_by("model", *span) == [
            UsageGroup("2026-03-01", "m1", 3, 1, 38, 3, 6, 9, 0.75),
            UsageGroup("2026-03-01", "m2", 1, 1, 5, 5, 0, 0, 0.0),
            UsageGroup("2026-03-02", "m1", 1, 1, 3, 3, 1, 0, 1.0),
        ]
        assert await spend.usage_by("user", *span) == [
            UsageGroup("2026-03-01", "", 1, 0, 8, 0, 0, 0, 0.0),
            UsageGroup("2026-03-01", "telegram:42", 3, 2, 35, 8, 6, 9, 0.75),
            UsageGroup("2026-03-02", "feishu:42", 1, 1, 3, 3, 1, 0, 1.0),
        ]
        # the top key by tokens over the span only: telegram (51) before feishu (6)
        assert await spend.usage_by("channel", "2026-03-01", "2026-03-02", 1) == [
            UsageGroup("2026-03-01", "telegram", 4, 2, 43, 8, 6, 9, 0.75),
        ]
        assert await spend.usage_by("agent", "2026-03-04", "2026-03-05", 10) == []


async def test_totalled_keys_names_a_scopes_keys_of_some_periods_the_biggest_first(
    open_storage: OpenStorage,
) -> None:
    async with open_storage() as db:
        spend = Store(db).spend
        periods = ["day:2026-03-01", "month:2026-03"]
        for sender, cost, period in [
            ("telegram:a", 0.5, "day:2026-03-01"),
            ("telegram:b", 2.0, "month:2026-03"),
            ("telegram:c", 9.0, "day:2026-02-28"),  # another period
            ("telegram:d", 1.0, "day:2026-03-01"),
        ]:
            await spend.charge(call(cost=cost), [("sender", sender, period)], T0)
        assert await spend.totalled_keys("sender", periods, 10) == [
            "telegram:b",
            "telegram:d",
            "telegram:a",
        ]
        assert await spend.totalled_keys("sender", periods, 2) == ["telegram:b", "telegram:d"]
        assert await spend.totalled_keys("agent", periods, 10) == []


async def test_prune_drops_a_batch_of_old_log_rows_and_stale_totals(
    open_storage: OpenStorage,
) -> None:
    old_key: TotalKey = ("sender", "telegram:42", "day:2026-03-01")
    kept_key: TotalKey = ("total", "*", "month:2026-03")
    cutoff = T0 + timedelta(days=1)
    newer = T0 + timedelta(days=2)
    async with open_storage() as db:
        spend = Store(db).spend
        await spend.charge(call(sender="a"), [old_key, kept_key], T0)
        await spend.charge(call(sender="b"), [old_key], T0 + timedelta(minutes=1))
        await spend.charge(call(sender="c"), [old_key], T0 + timedelta(minutes=2))
        await spend.charge(call(sender="d"), [kept_key], newer)

        assert await spend.prune(cutoff, cutoff, batch=2) == 3  # two log rows, one total
        assert [r[1] for r in await log_rows(db)] == ["c", "d"]
        assert await spend.totals([old_key, kept_key]) == {
            old_key: Total(0, 0.0),
            kept_key: Total(200, 0.5),
        }
        assert await spend.prune(cutoff, cutoff, batch=2) == 1
        assert await spend.prune(cutoff, cutoff, batch=2) == 0
        assert await log_rows(db) == [(iso(newer), "d", 70, 0.25)]
        assert await spend.totals([kept_key]) == {kept_key: Total(200, 0.5)}


async def test_prune_keeps_totals_by_their_own_cutoff(open_storage: OpenStorage) -> None:
    """The log and the totals have separate cutoffs: old log rows go while
    their totals, still in the month, stay."""
    key: TotalKey = ("total", "*", "month:2026-03")
    async with open_storage() as db:
        spend = Store(db).spend
        await spend.charge(call(), [key], T0)
        assert await spend.prune(T0 + timedelta(hours=1), T0, batch=10) == 1
        assert await log_rows(db) == []
        assert await spend.totals([key]) == {key: Total(100, 0.25)}


async def test_totals_and_overrides_survive_reopening_the_database(
    open_storage: OpenStorage,
) -> None:
    async with open_storage() as db:
        spend = Store(db).spend
        await spend.charge(call(), [SENDER_DAY, SENDER_MONTH], T0)
        await spend.charge(call(cost=0.5), [SENDER_DAY], T0 + timedelta(minutes=1))
        await spend.set_override("sender", "telegram:42", "daily_tokens", None, "a", T0)
    async with open_storage() as db:
        spend = Store(db).spend
        assert await spend.totals([SENDER_DAY, SENDER_MONTH]) == {
            SENDER_DAY: Total(200, 0.75),
            SENDER_MONTH: Total(100, 0.25),
        }
        assert await spend.overrides() == [
            Override("sender", "telegram:42", "daily_tokens", None, "a", iso(T0))
        ]
        moved = await spend.charge(call(), [SENDER_DAY], T0 + timedelta(minutes=2))
        assert moved[SENDER_DAY] == (Total(200, 0.75), Total(300, 1.0))


async def test_rebuild_totals_sums_the_log_per_key_and_for_the_whole_deployment(
    open_storage: OpenStorage,
) -> None:
    """A scope's totals summed afresh from the log (a scope that just got a
    budget), the total scope's one key among them, on every backend."""
    day = ("day:2026-03-01", "2026-03-01", "2026-03-01")
    month = ("month:2026-03", "2026-03-01", "2026-03-31")
    async with open_storage() as db:
        spend = Store(db).spend
        for n, c in enumerate(
            [
                call(sender="a", day="2026-03-01", cost=0.25),
                call(sender="a", day="2026-03-02", cost=0.5),
                call(sender="b", day="2026-03-01", tokens=(10, 10, 0, 0), cost=None),
            ]
        ):
            await spend.charge(c, [], T0 + timedelta(seconds=n))
        await spend.rebuild_totals(["sender", "total"], [day, month], T0)
        keys: list[TotalKey] = [
            ("sender", "telegram:a", "day:2026-03-01"),
            ("sender", "telegram:a", "month:2026-03"),
            ("sender", "telegram:b", "day:2026-03-01"),
            ("total", "*", "day:2026-03-01"),
            ("total", "*", "month:2026-03"),
        ]
        assert list((await spend.totals(keys)).values()) == [
            Total(100, 0.25),
            Total(200, 0.75),
            Total(20, 0.0),
            Total(120, 0.25),
            Total(220, 0.75),
        ]
        empty = ("day:2026-04-01", "2026-04-01", "2026-04-01")
        await spend.rebuild_totals(["total"], [empty], T0)  # no calls: zero
        assert await spend.totals([("total", "*", "day:2026-04-01")]) == {
            ("total", "*", "day:2026-04-01"): Total(0, 0.0)
        }
