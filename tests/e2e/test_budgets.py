"""Budgets (limits.<scope>.daily_tokens …, gateway/spend/): a whole gateway,
a fake LLM that reports usage and counts requests. A user over their daily
budget gets a reply in their language and no model call; another user goes
on; the spend survives a restart; the next day starts afresh; two chats of
one user at once overshoot by less than one turn's cap."""

from __future__ import annotations

import asyncio
from pathlib import Path

from gateway.i18n import Locale, Msg, tr
from tests.fakes.openai_server import FakeOpenAI, Reply, ScriptedToolCall
from tests.fakes.recording_channel import RecordingChannel
from tests.support import ShiftedClock, ask_on, make_config, running_gateway

CALL = (250, 50)  # what the fake reports for each call: 300 tokens


def exceeded_start(locale: Locale) -> str:
    """The over-budget reply up to its first placeholder."""
    template = tr(
        locale, Msg.BUDGET_EXCEEDED, whose="\0", period="", amount="", spent="", resets=""
    )
    return template.split("\0")[0]


async def test_a_users_daily_budget_stops_their_turns_until_the_next_day(
    home: Path, llm: FakeOpenAI
) -> None:
    clock = ShiftedClock()
    loaded = make_config(
        home,
        llm.base_url,
        limits={"sender": {"daily_tokens": 1000}},
        time={"timezone": "Asia/Shanghai"},
    )
    for _ in range(20):
        llm.add_text("sure", usage=CALL)
    channel = RecordingChannel()
    async with running_gateway(loaded, clock=clock, extra_channels=[channel]):
        for n in range(4):  # 300, 600, 900, 1200 tokens: the fourth goes over
            assert (
                await ask_on(channel, "alice", f"q{n}", sender_id="alice", language="en") == "sure"
            )
        assert len(llm.requests) == 4
        refused = await ask_on(channel, "alice", "one more", sender_id="alice", language="en")
        assert refused.startswith(exceeded_start(Locale.EN))
        assert "1,000 tokens" in refused
        assert "1,200 tokens" in refused
        assert len(llm.requests) == 4  # no model call for it
        near = [t for t in channel.texts("alice") if t.startswith("Heads-up")]
        assert len(near) == 1
        assert "90%" in near[0]

        # bob, who writes in Chinese, has his own budget
        for n in range(4):
            reply = await ask_on(channel, "bob", f"问题{n}", sender_id="bob", language="zh-hans")
            assert reply == "sure"
        refused_zh = await ask_on(channel, "bob", "再来", sender_id="bob", language="zh-hans")
        assert refused_zh.startswith(exceeded_start(Locale.ZH_CN))
        assert len(llm.requests) == 8

    # a restart keeps what was spent
    channel = RecordingChannel()
    async with running_gateway(loaded, clock=clock, extra_channels=[channel]):
        again = await ask_on(channel, "alice", "after restart", sender_id="alice", language="en")
        assert again.startswith(exceeded_start(Locale.EN))
        assert len(llm.requests) == 8
        clock.advance(days=1)  # past midnight in Asia/Shanghai: a new day
        assert await ask_on(channel, "alice", "new day", sender_id="alice", language="en") == "sure"
        assert len(llm.requests) == 9


async def test_two_chats_of_one_user_at_once_overshoot_by_less_than_a_turns_cap(
    home: Path, llm: FakeOpenAI
) -> None:
    """Each turn would make ten calls of 300 tokens (its cap is 3,000); the
    user's budget is 1,000. Both turns run at once: each call is checked
    against what both have spent, so together they stop at one call each
    past the budget, not at two turns' caps."""
    budget, cap = 1000, 3000
    loaded = make_config(
        home,
        llm.base_url,
        limits={"sender": {"daily_tokens": budget}},
        agents={"default": {"max_turn_tokens": cap, "max_identical_tool_calls": 0}},
    )
    for n in range(40):  # tool calls forever, each different (no loop guard)
        call = ScriptedToolCall("no_such_tool", {"n": n})
        llm.add_reply(Reply(tool_calls=(call,), usage=CALL))
    channel = RecordingChannel()
    async with running_gateway(loaded, extra_channels=[channel]) as gw:
        llm.hold()
        asks = [
            asyncio.create_task(ask_on(channel, chat, "go", sender_id="carol"))
            for chat in ("carol-home", "carol-work")
        ]
        await llm.wait_requests(2)  # both turns have a call in flight
        llm.release()
        replies = await asyncio.gather(*asks)
        assert gw.store is not None
        spent = await gw.store.db.read(
            lambda c: c.execute(
                "SELECT tokens FROM spend_totals WHERE scope = 'sender' AND key = 'rec:carol' "
                "AND period LIKE 'day:%'"
            ).fetchone()[0]
        )
    assert spent == 300 * len(llm.requests)  # every call charged, once
    assert spent >= budget  # the budget was reached
    assert spent - budget < cap  # the must-show: less than one turn's cap over
    assert spent - budget <= 2 * 300  # what the design promises: one call per running turn
    assert all(r.startswith(exceeded_start(Locale.EN)) for r in replies)
