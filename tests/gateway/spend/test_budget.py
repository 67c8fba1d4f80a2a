"""Budgets (gateway/spend/budget.py) over a real SQLite database and a clock
we move by hand: which budget applies, checking, charging and the notices."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from agent.messages import Usage
from gateway.bus import OutboundMessage
from gateway.config.limits import LimitsConfig
from gateway.i18n import Locale, Msg, tr
from gateway.spend.budget import Budgets, Line
from gateway.spend.payer import Payer, Periods
from storage.sqlite.db import Database
from storage.store import Store

SHANGHAI = ZoneInfo("Asia/Shanghai")
BERLIN = ZoneInfo("Europe/Berlin")
# 2026-12-08 04:00 in Shanghai: the local date is a day ahead of UTC's
T0 = datetime(2026, 12, 7, 20, 0, tzinfo=UTC)
DAY_RESETS = datetime(2026, 12, 8, 16, 0, tzinfo=UTC)  # 2026-12-09 00:00 Shanghai
MONTH_RESETS = datetime(2026, 12, 31, 16, 0, tzinfo=UTC)  # 2027-01-01 00:00 Shanghai
DAY_RESETS_TEXT = "2026-12-09 00:00 (Asia/Shanghai)"
MONTH_RESETS_TEXT = "2027-01-01 00:00 (Asia/Shanghai)"

ALICE = Payer("telegram", "c1", "42")
ADMIN_CHAT = {"channel": "telegram", "chat_id": "admins"}


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


class Setup:
    """A `Budgets` on the test's database, its clock and the notices it sent."""

    def __init__(self, db: Database, limits: dict[str, Any]) -> None:
        self.db = db
        self.clock = Clock(T0)
        self.sent: list[OutboundMessage] = []
        self.budgets = Budgets(
            Store(db),
            LimitsConfig.model_validate(limits),
            SHANGHAI,
            self.clock,
            notify=self.notify,
        )

    async def notify(self, message: OutboundMessage) -> None:
        self.sent.append(message)

    @property
    def notices(self) -> list[tuple[str, str, str]]:
        return [(m.channel, m.chat_id, m.text) for m in self.sent]

    async def spend(
        self, tokens: int, cost: float | None = None, payer: Payer = ALICE, agent: str = "default"
    ) -> None:
        await self.budgets.charge(
            payer, agent, "m1", Usage(tokens - tokens // 4, tokens // 4), cost
        )

    async def lines(self, payer: Payer = ALICE, agent: str | None = "default") -> list[Line]:
        lines, _, _ = await self.budgets.state(payer, agent, self.clock())
        return lines


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    async with Database(tmp_path / "db.sqlite") as opened:
        yield opened


def words(locale: Locale, whose: Msg, period: Msg, amount: str, spent: str) -> dict[str, str]:
    return {
        "whose": tr(locale, whose),
        "period": tr(locale, period),
        "amount": amount,
        "spent": spent,
    }


def tokens(locale: Locale, n: int) -> str:
    return tr(locale, Msg.AMOUNT_TOKENS, n=n)


# -- which budget applies -----------------------------------------------------------


async def test_the_config_defaults_apply_to_every_scope(db: Database) -> None:
    s = Setup(
        db,
        {
            "sender": {"daily_tokens": 1000, "monthly_cost": 5, "messages_per_minute": 3},
            "chat": {"daily_cost": 1.5},
            "agent": {"monthly_tokens": 9000},
            "total": {"monthly_cost": 100},
        },
    )
    assert await s.lines() == [
        Line("sender", "telegram:42", "daily_tokens", 1000),
        Line("sender", "telegram:42", "monthly_cost", 5.0),
        Line("chat", "telegram:c1", "daily_cost", 1.5),
        Line("agent", "default", "monthly_tokens", 9000),
        Line("total", "*", "monthly_cost", 100.0),
    ]
    assert await s.lines(agent=None) == [  # a gate check: no agent yet
        Line("sender", "telegram:42", "daily_tokens", 1000),
        Line("sender", "telegram:42", "monthly_cost", 5.0),
        Line("chat", "telegram:c1", "daily_cost", 1.5),
        Line("total", "*", "monthly_cost", 100.0),
    ]


async def test_a_runtime_default_replaces_the_config_default(db: Database) -> None:
    s = Setup(db, {"sender": {"daily_tokens": 1000, "monthly_tokens": 5000}})
    await s.budgets.set("sender", "*", "daily_tokens", 300, by="telegram:1")
    await s.budgets.set("sender", "*", "monthly_tokens", None, by="telegram:1")
    assert await s.lines() == [Line("sender", "telegram:42", "daily_tokens", 300)]
    assert await s.budgets.clear("sender", "*", None, by="telegram:1") == 2
    assert await s.lines() == [
        Line("sender", "telegram:42", "daily_tokens", 1000),
        Line("sender", "telegram:42", "monthly_tokens", 5000),
    ]


async def test_a_users_entry_replaces_the_default_field_by_field(db: Database) -> None:
    s = Setup(
        db,
        {
            "sender": {"daily_tokens": 1000, "monthly_tokens": 5000, "daily_cost": 2},
            "users": {
                "telegram:42": {"daily_tokens": None, "daily_cost": 7},
                "telegram:7": {"monthly_tokens": 9},
            },
        },
    )
    await s.budgets.set("sender", "*", "monthly_tokens", 4000, by="telegram:1")
    # 42: daily_tokens explicitly null (no limit), daily_cost its own, monthly the "*" default
    assert await s.lines() == [
        Line("sender", "telegram:42", "monthly_tokens", 4000),
        Line("sender", "telegram:42", "daily_cost", 7.0),
    ]
    # 7: its own monthly_tokens wins over the run-time default, the rest are defaults
    assert await s.lines(Payer("telegram", "c7", "7")) == [
        Line("sender", "telegram:7", "daily_tokens", 1000),
        Line("sender", "telegram:7", "monthly_tokens", 9),
        Line("sender", "telegram:7", "daily_cost", 2.0),
    ]
    await s.spend(3000)  # 42 has no daily token limit any more (monthly: 4000)
    assert await s.budgets.check(ALICE) is None


async def test_a_runtime_budget_for_one_key_wins_over_all(db: Database) -> None:
    s = Setup(
        db,
        {
            "sender": {"daily_tokens": 1000, "monthly_tokens": 5000},
            "users": {"telegram:42": {"daily_tokens": 2000}},
            "chats": {"telegram:c1": {"daily_tokens": 10}},
        },
    )
    await s.budgets.set("sender", "*", "daily_tokens", 3000, by="telegram:1")
    await s.budgets.set("sender", "telegram:42", "daily_tokens", 50, by="telegram:1")
    await s.budgets.set("sender", "telegram:42", "monthly_tokens", None, by="telegram:1")
    await s.budgets.set("chat", "telegram:c1", "daily_tokens", None, by="telegram:1")
    assert await s.lines() == [Line("sender", "telegram:42", "daily_tokens", 50)]
    await s.spend(60)
    over = await s.budgets.check(ALICE)
    assert over is not None
    assert (over.line, over.spent) == (Line("sender", "telegram:42", "daily_tokens", 50), 60)


# -- checking ------------------------------------------------------------------------


async def test_check_is_none_while_under_and_the_used_up_line_once_reached(
    db: Database,
) -> None:
    s = Setup(db, {"sender": {"daily_tokens": 1000}})
    await s.spend(999)
    assert await s.budgets.check(ALICE) is None
    await s.spend(1)
    over = await s.budgets.check(ALICE, "default")
    assert over is not None
    assert over.line == Line("sender", "telegram:42", "daily_tokens", 1000)
    assert over.spent == 1000
    assert over.resets_at.astimezone(UTC) == DAY_RESETS
    assert over.zone == SHANGHAI
    assert await s.budgets.check(Payer("telegram", "c1", "7")) is None  # someone else


async def test_check_returns_the_first_line_used_up_in_scope_order(db: Database) -> None:
    s = Setup(db, {"sender": {"daily_tokens": 1000}, "total": {"daily_tokens": 500}})
    await s.spend(600)
    over = await s.budgets.check(ALICE)
    assert over is not None
    assert over.line == Line("total", "*", "daily_tokens", 500)
    await s.spend(400)
    over = await s.budgets.check(ALICE)
    assert over is not None
    assert over.line == Line("sender", "telegram:42", "daily_tokens", 1000)


async def test_a_monthly_budget_resets_on_the_first_of_the_local_month(db: Database) -> None:
    s = Setup(db, {"sender": {"monthly_cost": 1.0}})
    s.clock.now = datetime(2026, 12, 31, 10, 0, tzinfo=UTC)  # 18:00 in Shanghai
    await s.spend(10, cost=1.0)
    over = await s.budgets.check(ALICE)
    assert over is not None
    assert over.line == Line("sender", "telegram:42", "monthly_cost", 1.0)
    assert over.spent == 1.0
    assert over.resets_at.astimezone(UTC) == MONTH_RESETS
    s.clock.now = datetime(2026, 12, 31, 16, 0, tzinfo=UTC)  # January in Shanghai
    assert await s.budgets.check(ALICE) is None


async def test_a_new_day_resets_daily_totals_but_not_monthly_ones(db: Database) -> None:
    s = Setup(db, {"sender": {"daily_tokens": 100, "monthly_tokens": 150}})
    await s.spend(100)
    over = await s.budgets.check(ALICE)
    assert over is not None
    assert over.line.field == "daily_tokens"
    s.clock.now = T0 + timedelta(days=1)
    assert await s.budgets.check(ALICE) is None
    await s.spend(50)
    over = await s.budgets.check(ALICE)
    assert over is not None
    assert (over.line.field, over.spent) == ("monthly_tokens", 150)
    assert over.resets_at.astimezone(UTC) == MONTH_RESETS


@pytest.mark.parametrize(
    ("exempt", "refused"),
    [(True, None), (False, Line("sender", "telegram:1", "daily_tokens", 10))],
)
async def test_admins_are_exempt_only_when_admins_exempt(
    db: Database, exempt: bool, refused: Line | None
) -> None:
    s = Setup(db, {"sender": {"daily_tokens": 10}, "admins_exempt": exempt})
    boss = Payer("telegram", "c1", "1", admin=True)
    await s.spend(20, payer=boss)
    over = await s.budgets.check(boss)
    assert (None if over is None else over.line) == refused


async def test_an_ungated_payer_is_never_refused(db: Database) -> None:
    s = Setup(db, {"sender": {"daily_tokens": 10}, "total": {"daily_tokens": 10}})
    background = Payer("telegram", "c1", "42", kind="memory", gated=False)
    await s.spend(500, payer=background)
    assert await s.budgets.check(background, "default") is None
    assert await s.budgets.check(ALICE, "default") is not None  # the same sender, gated


def test_periods_follow_the_local_calendar_across_dst() -> None:
    spring = Periods.of(datetime(2026, 3, 28, 23, 30, tzinfo=UTC), BERLIN)  # 00:30 CET
    assert (spring.day, spring.month, spring.date) == (
        "day:2026-03-29",
        "month:2026-03",
        "2026-03-29",
    )
    assert spring.day_ends.astimezone(UTC) == datetime(2026, 3, 29, 22, 0, tzinfo=UTC)  # 23 h
    assert spring.month_ends.astimezone(UTC) == datetime(2026, 3, 31, 22, 0, tzinfo=UTC)
    autumn = Periods.of(datetime(2026, 10, 25, 12, 0, tzinfo=UTC), BERLIN)
    assert autumn.day == "day:2026-10-25"
    assert autumn.day_ends.astimezone(UTC) == datetime(2026, 10, 25, 23, 0, tzinfo=UTC)  # 25 h
    assert autumn.key("daily_cost") == "day:2026-10-25"
    assert autumn.key("monthly_tokens") == "month:2026-10"
    assert autumn.ends("monthly_cost").astimezone(UTC) == datetime(2026, 10, 31, 23, 0, tzinfo=UTC)
    shanghai = Periods.of(T0, SHANGHAI)
    assert shanghai.date == "2026-12-08"
    assert shanghai.day_ends.astimezone(UTC) == DAY_RESETS
    assert shanghai.month_ends.astimezone(UTC) == MONTH_RESETS


# -- charging and notices ----------------------------------------------------------------


async def test_one_near_notice_and_one_admin_notice_in_english(db: Database) -> None:
    s = Setup(db, {"sender": {"daily_tokens": 1000}, "admin_chat": ADMIN_CHAT})
    await s.spend(500)
    assert s.notices == []
    await s.spend(300)  # 80 %
    daily = (Msg.WHOSE_SENDER, Msg.PERIOD_DAILY)
    near = tr(
        Locale.EN,
        Msg.BUDGET_NEAR,
        pct=80,
        resets=DAY_RESETS_TEXT,
        **words(Locale.EN, *daily, tokens(Locale.EN, 1000), tokens(Locale.EN, 800)),
    )
    assert s.notices == [("telegram", "c1", near)]
    await s.spend(100)
    await s.spend(100)  # 1000: used up
    admin = tr(
        Locale.EN,
        Msg.BUDGET_ADMIN,
        scope="sender",
        key="telegram:42",
        field="daily_tokens",
        resets=DAY_RESETS_TEXT,
        **words(Locale.EN, *daily, tokens(Locale.EN, 1000), tokens(Locale.EN, 1000)),
    )
    assert s.notices == [("telegram", "c1", near), ("telegram", "admins", admin)]
    await s.spend(100)
    await s.spend(100)
    assert s.notices == [("telegram", "c1", near), ("telegram", "admins", admin)]


async def test_the_near_notice_is_in_the_payers_locale(db: Database) -> None:
    s = Setup(db, {"chat": {"monthly_cost": 2.0}})
    chinese = Payer("telegram", "c1", "42", locale=Locale.ZH_CN)
    await s.spend(10, cost=1.0, payer=chinese)
    await s.spend(10, cost=0.7, payer=chinese)  # 85 %
    await s.spend(10, cost=0.1, payer=chinese)
    near = tr(
        Locale.ZH_CN,
        Msg.BUDGET_NEAR,
        pct=85,
        resets=MONTH_RESETS_TEXT,
        **words(
            Locale.ZH_CN,
            Msg.WHOSE_CHAT,
            Msg.PERIOD_MONTHLY,
            tr(Locale.ZH_CN, Msg.AMOUNT_COST, cost="2"),
            tr(Locale.ZH_CN, Msg.AMOUNT_COST, cost="1.7"),
        ),
    )
    assert s.notices == [("telegram", "c1", near)]  # no admin_chat: no admin notice


async def test_a_jump_past_the_budget_sends_only_the_admin_notice(db: Database) -> None:
    s = Setup(db, {"sender": {"daily_tokens": 1000}, "admin_chat": ADMIN_CHAT})
    await s.spend(1200)
    assert [(m.channel, m.chat_id) for m in s.sent] == [("telegram", "admins")]


async def test_over_budget_text_in_chinese(db: Database) -> None:
    s = Setup(db, {"sender": {"daily_tokens": 1000}})
    await s.spend(1200)
    over = await s.budgets.check(ALICE)
    assert over is not None
    zh = Locale.ZH_CN
    expected = tr(
        zh,
        Msg.BUDGET_EXCEEDED,
        resets=DAY_RESETS_TEXT,
        **words(zh, Msg.WHOSE_SENDER, Msg.PERIOD_DAILY, tokens(zh, 1000), tokens(zh, 1200)),
    )
    assert over.text(zh) == expected
    assert over.text(Locale.EN) != expected


async def test_a_payer_without_a_sender_is_charged_to_chat_agent_and_total(
    db: Database,
) -> None:
    every = {"daily_tokens": 10_000}
    s = Setup(db, dict.fromkeys(("sender", "chat", "agent", "total"), every))
    compaction = Payer("telegram", "c1", "", kind="compaction", gated=False)
    await s.spend(100, cost=0.5, payer=compaction)
    totals = await db.read(
        lambda c: c.execute(
            "SELECT scope, key, period, tokens, cost FROM spend_totals ORDER BY scope, key, period"
        ).fetchall()
    )
    assert [tuple(r) for r in totals] == [
        (scope, key, period, 100, 0.5)
        for scope, key in [("agent", "default"), ("chat", "telegram:c1"), ("total", "*")]
        for period in ("day:2026-12-08", "month:2026-12")
    ]
    log = await db.read(
        lambda c: c.execute(
            "SELECT channel, chat_id, sender_id, agent, kind, day, input_tokens, output_tokens "
            "FROM usage_log"
        ).fetchall()
    )
    assert [tuple(r) for r in log] == [
        ("telegram", "c1", "", "default", "compaction", "2026-12-08", 75, 25)
    ]


async def test_a_cost_budget_is_reported_used_up_exactly_once(db: Database) -> None:
    """0.01 + 0.01 reaches a 0.02 budget; the third call must not "reach" it
    again (storage/sql/spend.py computes `before` as after - cost, which
    rounds to 0.019999999999999997)."""
    s = Setup(db, {"sender": {"daily_cost": 0.02}, "admin_chat": ADMIN_CHAT})
    for _ in range(3):
        await s.spend(10, cost=0.01)
    assert [m.chat_id for m in s.sent] == ["admins"]


async def _totals(db: Database) -> list[tuple[Any, ...]]:
    rows = await db.read(
        lambda c: c.execute(
            "SELECT scope, key, period, tokens FROM spend_totals ORDER BY scope, key, period"
        ).fetchall()
    )
    return [tuple(r) for r in rows]


async def test_only_scopes_with_a_budget_keep_totals_and_a_new_one_is_summed_from_the_log(
    db: Database,
) -> None:
    """No budget: calls are logged, no totals kept (the cheap path). A budget set
    at run time sums that scope's day and month from the log before it is checked."""
    s = Setup(db, {})
    await s.budgets.prepare()
    await s.spend(300)
    await s.spend(300, payer=Payer("telegram", "c2", "7"))
    await s.budgets.drained()
    assert await _totals(db) == []
    assert await s.budgets.check(ALICE) is None

    await s.budgets.set("sender", "*", "daily_tokens", 500, "test")
    assert await _totals(db) == [
        ("sender", "telegram:42", "day:2026-12-08", 300),
        ("sender", "telegram:42", "month:2026-12", 300),
        ("sender", "telegram:7", "day:2026-12-08", 300),
        ("sender", "telegram:7", "month:2026-12", 300),
    ]
    await s.spend(300)  # 600 of 500: counted into the totals from now on
    over = await s.budgets.check(ALICE)
    assert over is not None
    assert over.spent == 600
    assert await s.budgets.check(Payer("telegram", "c2", "7")) is None  # 300 of 500


async def test_a_restart_sums_the_totals_of_budgets_added_to_the_config(db: Database) -> None:
    """Calls made while the file had no budget count once it has one."""
    before = Setup(db, {})
    await before.budgets.prepare()
    await before.spend(400)
    await before.budgets.drained()
    after = Setup(db, {"sender": {"daily_tokens": 400}})
    await after.budgets.prepare()
    over = await after.budgets.check(ALICE)
    assert over is not None
    assert over.spent == 400
