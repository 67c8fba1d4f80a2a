"""Per-sender rate limits (limits.sender): a message over the rate is recorded
and answered with a reply saying so, never dropped; commands are not counted;
the count survives a restart; the window passing lets the sender in again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gateway.i18n import Locale, Msg, tr
from tests.fakes.openai_server import FakeOpenAI, last_user_text
from tests.fakes.recording_channel import RecordingChannel
from tests.support import (
    ShiftedClock,
    ask_on,
    make_config,
    running_gateway,
    wait_until,
    ws_client,
)

LIMITS = {"sender": {"messages_per_minute": 10}}


def _refusal_prefix() -> str:
    return tr(Locale.EN, Msg.RATE_LIMITED, limit=10, per=tr(Locale.EN, Msg.PER_MINUTE), wait=0)[:60]


async def _replies(client: Any, ids: list[str]) -> dict[str, str]:
    """The reply to each of `ids` (a reply names the message it answers)."""
    replies: dict[str, str] = {}
    while len(replies) < len(ids):
        frame = await client.recv(timeout=20)
        if frame["type"] == "message" and frame.get("reply_to") in ids:
            replies[frame["reply_to"]] = frame["text"]
    return replies


async def test_thirty_messages_at_ten_a_minute_are_answered_or_refused_never_dropped(
    home: Path, llm: FakeOpenAI
) -> None:
    clock = ShiftedClock()
    loaded = make_config(home, llm.base_url, limits=LIMITS, gateway={"queue_mode": "followup"})
    async with running_gateway(loaded, clock=clock) as gw, ws_client(gw, "fast") as client:
        ids = [await client.send(f"message {n}") for n in range(30)]
        replies = await _replies(client, ids)
        assert gw.store is not None
        open_rows = await gw.store.db.read(
            lambda c: c.execute("SELECT count(*) FROM inbox WHERE state != 'done'").fetchone()[0]
        )
    answered = [i for i in ids if replies[i].startswith("echo: ")]
    refused = [i for i in ids if replies[i].startswith(_refusal_prefix())]
    assert (len(answered), len(refused)) == (10, 20)
    assert answered == ids[:10]  # in the order they came
    assert len(llm.requests) == 10  # no model call for a refused one
    assert open_rows == 0  # every message recorded and closed
    assert "Send it again in" in replies[refused[0]]
    limited = gw.metrics.registry.get_sample_value(
        "picobot_rate_limited_total", {"channel": "websocket", "limit": "sender_minute"}
    )
    assert limited == 20

    # a restart does not reset the count; a command is never counted
    async with running_gateway(loaded, clock=clock) as gw, ws_client(gw, "fast") as client:
        assert (await client.ask("one more")).startswith(_refusal_prefix())
        assert await client.ask("/stop") == tr(Locale.EN, Msg.NOTHING_RUNNING)
        clock.advance(seconds=61)  # the minute has passed
        assert await client.ask("later") == "echo: later"


async def test_the_refusal_speaks_the_senders_language(home: Path, llm: FakeOpenAI) -> None:
    loaded = make_config(
        home,
        llm.base_url,
        limits={"sender": {"messages_per_minute": 1}},
        gateway={"locale": "zh-CN"},
    )
    async with running_gateway(loaded) as gw, ws_client(gw, "zh") as client:
        assert await client.ask("你好") == "echo: 你好"
        reply = await client.ask("再来一条")
    assert reply.startswith("你发消息太快了（每分钟最多 1 条）")


async def test_scheduled_runs_are_not_counted_against_a_rate(home: Path, llm: FakeOpenAI) -> None:
    """Jobs run as sender "scheduler" on the target's channel: not a person sending."""
    jobs = [
        {
            "id": f"job.{n}",
            "kind": "agent_task",
            "schedule": {"type": "delay", "seconds": 0.2},
            "target": {"channel": "rec", "chat_id": f"team-{n}"},  # a turn each
            "payload": {"prompt": f"report {n}"},
        }
        for n in range(3)
    ]
    channel = RecordingChannel()
    loaded = make_config(
        home,
        llm.base_url,
        limits={"sender": {"messages_per_minute": 1}},
        scheduler={"enabled": True, "tick_resolution_ms": 10, "jobs": jobs},
    )
    async with running_gateway(loaded, extra_channels=[channel]):
        sent = await channel.wait_sent(3)
    assert sorted(s.message.text for s in sent) == [f"echo: report {n}" for n in range(3)]


async def test_later_mode_keeps_messages_over_the_rate_and_answers_them_in_order(
    home: Path, llm: FakeOpenAI
) -> None:
    """limits.over_rate "later": five messages at two a minute; two are answered,
    three get a note and are answered as the minute passes (by the gateway's
    clock), in order, each once; one still waiting at a restart is answered
    after it."""
    clock = ShiftedClock()
    loaded = make_config(
        home,
        llm.base_url,
        limits={"sender": {"messages_per_minute": 2}, "over_rate": "later"},
        gateway={"queue_mode": "followup"},
    )
    channel = RecordingChannel()
    async with running_gateway(loaded, clock=clock, extra_channels=[channel]) as gw:
        for n in range(5):
            await channel.submit("home", f"m{n}", f"m{n}", sender_id="ann", language="en")
        sent = await channel.wait_sent(5)  # two answers and three notes
        assert sorted(s.message.text for s in sent) == [
            *[_later_note(2)] * 3, "echo: m0", "echo: m1",
        ]  # fmt: skip
        later = gw.processor.access.later if gw.processor and gw.processor.access else None
        assert later is not None
        assert len(later) == 3
        clock.advance(seconds=61)  # m0's and m1's places are free again
        later.wake()
        await channel.wait_sent(7)

        def m4_waits_again() -> bool:  # over again: it waits once more, no second note
            due = later.waiting(("rec", "ann"))
            return due is not None and due > clock()

        await wait_until(m4_waits_again)
        assert len(later) == 1
    assert len(channel.sent) == 7
    assert len(llm.requests) == 4

    clock.advance(seconds=61)
    channel = RecordingChannel()
    async with running_gateway(loaded, clock=clock, extra_channels=[channel]):
        [answer] = await channel.wait_sent(1)  # recovery takes up the open row
    assert answer.message.text == "echo: m4"
    assert len(llm.requests) == 5
    answered = [last_user_text(r["messages"]) for r in llm.requests]
    assert answered == ["m0", "m1", "m2", "m3", "m4"]  # in the order they were sent


async def test_later_mode_refuses_past_the_waiting_cap(home: Path, llm: FakeOpenAI) -> None:
    loaded = make_config(
        home,
        llm.base_url,
        limits={
            "sender": {"messages_per_minute": 1},
            "over_rate": "later",
            "max_waiting_per_sender": 1,
        },
        gateway={"queue_mode": "followup"},
    )
    channel = RecordingChannel()
    async with running_gateway(loaded, extra_channels=[channel]):
        replies = [
            await ask_on(channel, "home", f"m{n}", sender_id="ben", language="en") for n in range(3)
        ]
    assert replies[0] == "echo: m0"
    assert replies[1] == _later_note(1)
    assert replies[2].startswith(_refusal_prefix()[:40])  # refused: one waits already


def _later_note(limit: int) -> str:
    """The note on a message kept for a minute's place (its wait rounds up to 60 s)."""
    per = tr(Locale.EN, Msg.PER_MINUTE)
    return tr(Locale.EN, Msg.RATE_LATER, limit=limit, per=per, wait=60)
