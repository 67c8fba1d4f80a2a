"""Session resets through the real gateway: after idle time (`session_ttl_secs`)
and daily (`session_reset_at`), with the wall clock injected and moved.

Storage stamps activity with the real time, so the injected clock is the real
time plus an offset that only grows: "3 s idle" is the clock moved 3 s ahead.
Each test moves it across a reset once.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from gateway.i18n import Locale, Msg, tr
from storage.sqlite.db import Database
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.recording_channel import RecordingChannel
from tests.support import (
    ShiftedClock,
    WsClient,
    conversation,
    make_config,
    running_gateway,
    ws_client,
)


async def exchange(ws: WsClient, text: str) -> list[dict[str, Any]]:
    """Send `text`; every `message` frame up to and including its reply."""
    msg_id = await ws.send(text)
    frames: list[dict[str, Any]] = []
    while not frames or frames[-1].get("reply_to") != msg_id:
        frames.append(await ws.recv_type("message"))
    return frames


async def session_rows(path: Path) -> list[tuple[str, str]]:
    async with Database(path) as db:
        rows = await db.read(
            lambda c: c.execute(
                "SELECT id, status FROM sessions ORDER BY created_at, id"
            ).fetchall()
        )
    return [(r["id"], r["status"]) for r in rows]


async def test_a_message_after_the_ttl_starts_a_new_session(home: Path, llm: FakeOpenAI) -> None:
    clock = ShiftedClock()
    loaded = make_config(home, llm.base_url, gateway={"session_ttl_secs": 2})
    async with running_gateway(loaded, clock=clock) as gw, ws_client(gw) as ws:
        assert [f["text"] for f in await exchange(ws, "first")] == ["echo: first"]
        # at once: well within the TTL, the session goes on
        assert [f["text"] for f in await exchange(ws, "second")] == ["echo: second"]
        clock.advance(seconds=3)  # 3 s idle
        notice, reply = await exchange(ws, "third")
        listing = await ws.ask("/sessions")
    assert (notice["text"], notice["reply_to"]) == (tr(Locale.EN, Msg.SESSION_RESET), None)
    assert notice["session_id"] == reply["session_id"] == "chat-1#2"
    assert reply["text"] == "echo: third"
    # the model's request carries no earlier history
    assert [m["content"] for m in conversation(llm.requests[1])] == [
        "first",
        "echo: first",
        "second",
    ]
    assert [m["content"] for m in conversation(llm.requests[2])] == ["third"]
    # the old session is archived, not deleted, and listed
    assert await session_rows(loaded.storage_path) == [
        ("chat-1", "archived"),
        ("chat-1#2", "active"),
    ]
    lines = listing.splitlines()
    assert lines[1].startswith('1. chat-1 "first" — ')  # titled from its first message
    assert lines[1].endswith("(archived)")
    assert lines[2].startswith('2. chat-1#2 "third" — ')
    assert lines[2].endswith("← current")


async def test_the_first_message_after_the_daily_reset_time_starts_a_new_session(
    home: Path, llm: FakeOpenAI
) -> None:
    zone = ZoneInfo("Asia/Shanghai")
    clock = ShiftedClock()
    reset_at = (datetime.now(zone) + timedelta(hours=1)).strftime("%H:%M")
    loaded = make_config(
        home,
        llm.base_url,
        gateway={"session_reset_at": reset_at},
        time={"timezone": "Asia/Shanghai"},
    )
    async with running_gateway(loaded, clock=clock) as gw, ws_client(gw) as ws:
        await exchange(ws, "one")
        clock.advance(minutes=30)  # still before today's reset time
        assert [f["text"] for f in await exchange(ws, "two")] == ["echo: two"]
        clock.advance(minutes=90)  # past it
        notice, reply = await exchange(ws, "three")
    # in a Shanghai time zone the gateway's own texts are Chinese (gateway.locale "auto")
    assert (notice["text"], reply["text"]) == (tr(Locale.ZH_CN, Msg.SESSION_RESET), "echo: three")
    assert [m["content"] for m in conversation(llm.requests[1])] == ["one", "echo: one", "two"]
    assert [m["content"] for m in conversation(llm.requests[2])] == ["three"]
    assert await session_rows(loaded.storage_path) == [
        ("chat-1", "archived"),
        ("chat-1#2", "active"),
    ]
    # Later messages that day stay in the new session: storage stamps activity
    # with the real time, which this shifted clock has left behind, so that is
    # shown with explicit times in tests/gateway/test_session_reset.py.


async def test_a_channel_can_turn_the_gateway_reset_off(home: Path, llm: FakeOpenAI) -> None:
    clock = ShiftedClock()
    loaded = make_config(
        home,
        llm.base_url,
        gateway={"session_ttl_secs": 2},
        channels={"websocket": {"session_ttl_secs": 0}},
    )
    async with running_gateway(loaded, clock=clock) as gw, ws_client(gw) as ws:
        await exchange(ws, "first")
        clock.advance(hours=5)
        assert [f["text"] for f in await exchange(ws, "second")] == ["echo: second"]
    assert await session_rows(loaded.storage_path) == [("chat-1", "active")]


async def test_scheduled_jobs_keep_their_own_session(home: Path, llm: FakeOpenAI) -> None:
    """A job's turns follow the job's session rules, not the chat's idle reset."""
    job = {
        "id": "report",
        "kind": "agent_task",
        "schedule": {"type": "interval", "seconds": 0.3},
        "target": {"channel": "rec", "chat_id": "team"},
        "payload": {"prompt": "Report"},
    }
    clock = ShiftedClock()
    clock.advance(days=1)  # every session is long idle by this clock
    channel = RecordingChannel()
    loaded = make_config(
        home,
        llm.base_url,
        gateway={"session_ttl_secs": 2},
        scheduler={"enabled": True, "tick_resolution_ms": 10, "jobs": [job]},
    )
    async with running_gateway(loaded, extra_channels=[channel], clock=clock):
        await channel.wait_sent(2)
    texts = channel.texts()  # (a third run may get in before the gateway stops)
    assert len(texts) >= 2
    assert set(texts) == {"echo: Report"}  # no new-session notice
    assert [m["content"] for m in conversation(llm.requests[1])] == [
        "Report",
        "echo: Report",
        "Report",
    ]
    assert await session_rows(loaded.storage_path) == [("rec:team", "active")]
