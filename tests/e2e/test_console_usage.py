"""The console's usage API (gateway/console/usage.py): after scripted turns
on two days, through two agents on two fake LLMs (one reporting prompt-cache
reads and writes), GET /api/ops/usage gives per day, per agent, model,
channel and user exactly the sums of the usage_log rows in the database, the
turns as distinct runs, the cache share, and each budget with what its total
holds; `days` is bounded."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import aiohttp

from gateway.app import Gateway
from tests.consoles import usage_config
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.openai_server import FakeOpenAI, Reply, ScriptedToolCall
from tests.fakes.prompt_cache import AnthropicCache
from tests.fakes.recording_channel import RecordingChannel
from tests.support import ShiftedClock, ask_on, running_gateway, wait_until, ws_client

NUMBERS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "cost")
Row = dict[str, Any]


async def logged(gw: Gateway) -> list[Row]:
    """Every usage_log row, as the database holds it."""
    assert gw.store is not None
    columns = ("day", "agent", "model", "channel", "sender_id", "run_id", *NUMBERS)
    rows = await gw.store.db.read(
        lambda c: c.execute(f"SELECT {', '.join(columns)} FROM usage_log").fetchall()
    )
    return [dict(zip(columns, r, strict=True)) for r in rows]


def sums(rows: Iterable[Row]) -> dict[str, float]:
    rows = list(rows)
    out: dict[str, float] = {n: sum(r[n] or 0 for r in rows) for n in NUMBERS}
    out["calls"] = len(rows)
    out["turns"] = len({r["run_id"] for r in rows if r["run_id"] is not None})
    return out


def shown(entry: Row) -> dict[str, float]:
    return {n: entry[n] for n in (*NUMBERS, "calls", "turns")}


def close(a: dict[str, float], b: dict[str, float]) -> bool:
    return a.keys() == b.keys() and all(abs(a[k] - b[k]) < 1e-9 for k in a)


KEYS: dict[str, Callable[[Row], str]] = {
    "agent": lambda r: r["agent"],
    "model": lambda r: r["model"],
    "channel": lambda r: r["channel"],
    "user": lambda r: f"{r['channel']}:{r['sender_id']}" if r["sender_id"] else "",
}


async def test_the_usage_api_sums_the_usage_log_by_day_and_dimension(
    home: Path, llm: FakeOpenAI
) -> None:
    clock = ShiftedClock()
    async with FakeAnthropic(prompt_cache=AnthropicCache(min_tokens=1)) as claude:
        loaded = usage_config(
            home,
            llm.base_url,
            claude.base_url,
            {
                "sender": {"daily_tokens": 100_000},
                "users": {"rec:alice": {"daily_tokens": 50_000}},
                "total": {"monthly_cost": 5},
            },
            time={"timezone": "Asia/Shanghai"},
        )
        # a turn of two calls (a tool call, then the answer), then one-call turns
        llm.add_reply(
            Reply(
                tool_calls=(ScriptedToolCall("calculator", {"expression": "6*7"}),), usage=(300, 20)
            )
        )
        for usage in [(400, 10), (250, 50), (120, 30)]:
            llm.add_text("sure", usage=usage)
        for _ in range(2):
            claude.add_text("a cached answer")
        channel = RecordingChannel()
        async with (
            running_gateway(loaded, clock=clock, extra_channels=[channel]) as gw,
            aiohttp.ClientSession() as http,
        ):
            await ask_on(channel, "alice", "what is 6*7?", sender_id="alice")
            await ask_on(channel, "bob", "hello", sender_id="bob")
            clock.advance(days=1)  # past midnight in Asia/Shanghai: a second day
            await ask_on(channel, "alice", "again", sender_id="alice")
            async with ws_client(gw) as client:
                await client.ask("first", timeout=60)  # the first loads the SDK
                await client.ask("second")
            calls = len(llm.requests) + len(claude.requests)
            await wait_until(lambda: _count(gw, calls))
            rows = await logged(gw)

            async with http.get(gw.base_url + "/api/ops/usage") as response:
                assert response.status == 200
                body = await response.json()
            for bad in ("0", "367", "-1", "seven", "1.5", ""):
                async with http.get(gw.base_url + f"/api/ops/usage?days={bad}") as response:
                    assert response.status == 400, bad
                    assert "days" in (await response.json())["error"]
            async with http.get(gw.base_url + "/api/ops/usage?days=1") as response:
                one_day = await response.json()

    assert len(rows) == calls == 6  # the first turn made two calls
    by_day: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        by_day[r["day"]].append(r)
    assert len(by_day) == 2
    today, yesterday = max(by_day), min(by_day)

    # per day: every day of the last 30 is there, those without calls at zero
    assert body["days"] == 30
    assert len(body["series"]) == 30
    assert body["last_day"] == body["today"] == today
    assert body["timezone"] == "Asia/Shanghai"
    assert body["currency"] == "USD"
    for entry in body["series"]:
        assert close(shown(entry), sums(by_day.get(entry["day"], []))), entry["day"]
    assert [e["turns"] for e in body["series"][-2:]] == [2, 3]  # a turn of two calls is one
    assert close(shown(body["totals"]), sums(rows))
    totals = body["totals"]
    assert totals["cache_read_tokens"] > 0  # claude's cache
    assert totals["cache_write_tokens"] > 0
    assert totals["cache_share"] == totals["cache_read_tokens"] / totals["input_tokens"]
    assert totals["output_tokens"] == sum(u["completion_tokens"] for _, u in llm.billed) + sum(
        u["output_tokens"] for _, u in claude.billed
    )

    # by agent, model, channel and user: the keys of the log, each its rows' sums
    for dimension, key_of in KEYS.items():
        entries = body["breakdowns"][dimension]
        assert {e["key"] for e in entries} == {key_of(r) for r in rows}, dimension
        for e in entries:
            mine = [r for r in rows if key_of(r) == e["key"]]
            assert close(shown(e), sums(mine)), (dimension, e["key"])
            per_day = [sum(r["input_tokens"] + r["output_tokens"] for r in mine if r["day"] == d)
                       for d in (s["day"] for s in body["series"])]  # fmt: skip
            assert e["days"]["tokens"] == per_day
    assert {e["key"] for e in body["breakdowns"]["agent"]} == {"default", "claude"}
    assert {"rec:alice", "rec:bob"} <= {e["key"] for e in body["breakdowns"]["user"]}

    # days=1: today alone
    assert [s["day"] for s in one_day["series"]] == [today]
    assert close(shown(one_day["totals"]), sums(by_day[today]))

    # budgets: the defaults, alice's own, bob's and the total, spent as the log holds it
    budgets = {(b["scope"], b["key"], b["field"]): b for b in body["budgets"]}
    default = budgets[("sender", "*", "daily_tokens")]
    assert default["default"]
    assert default["spent"] is None
    assert default["limit"] == 100_000

    def tokens(sender: str, day: str) -> int:
        return sum(
            r["input_tokens"] + r["output_tokens"]
            for r in by_day[day]
            if (r["channel"], r["sender_id"]) == ("rec", sender)
        )

    alice = budgets[("sender", "rec:alice", "daily_tokens")]
    assert (alice["limit"], alice["period"], alice["unit"]) == (50_000, "day", "tokens")
    assert alice["spent"] == tokens("alice", today) > 0  # today's only: yesterday's turn is past
    assert alice["percent"] == 100 * alice["spent"] / 50_000
    assert tokens("alice", yesterday) > 0
    if yesterday[:7] == today[:7]:  # bob spent yesterday only: nothing today
        assert budgets[("sender", "rec:bob", "daily_tokens")]["spent"] == 0
    total = budgets[("total", "*", "monthly_cost")]
    month = [r for r in rows if r["day"][:7] == today[:7]]
    assert abs(total["spent"] - sum(r["cost"] for r in month)) < 1e-9
    assert total["unit"] == "cost"
    assert not total["default"]


async def _count(gw: Gateway, calls: int) -> bool:
    return len(await logged(gw)) >= calls
