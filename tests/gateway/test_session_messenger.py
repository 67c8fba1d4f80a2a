"""send_session_message over the real messenger and database: the limit is the
sender's and the target chat's, whichever session or sub-agent sends, and it
survives a restart (the clock is the test's, so the minute needs no sleep)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agent.tools.base import ToolContext, ToolError, ToolServices, ToolSettings
from agent.tools.session_message import SendArgs, SendSessionMessageTool
from gateway.bus import OutboundMessage
from gateway.sessions.messages import OutboxMessenger
from storage.sqlite.db import Database
from storage.store import Store

RATE_LIMIT = r"^rate limit: at most 6 session messages per minute"


class Clock:
    def __init__(self) -> None:
        self.at = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)

    def now(self) -> datetime:
        return self.at


class Sink:
    def __init__(self) -> None:
        self.handed: list[OutboundMessage] = []

    def wake(self, channel: str) -> None:
        pass

    def handoff(self, message: OutboundMessage, row_id: int) -> None:
        self.handed.append(message)


def turn(
    messenger: OutboxMessenger, session_id: str, sender: str = "alice", chat: str = "c1"
) -> ToolContext:
    services = ToolServices(messenger=messenger)
    return ToolContext(
        session_id, "telegram", chat, sender, ToolSettings(Path("/")), services=services
    )


def messenger_on(db: Database, clock: Clock, sink: Sink) -> OutboxMessenger:
    return OutboxMessenger(Store(db), sink, ["telegram"], lambda _c, _id: None, clock=clock.now)


async def test_one_senders_limit_spans_new_sessions_sub_agents_and_a_restart(
    tmp_path: Path,
) -> None:
    tool, clock, sink = SendSessionMessageTool(), Clock(), Sink()
    path = tmp_path / "db.sqlite"
    async with Database(path) as db:
        messenger = messenger_on(db, clock, sink)
        first = turn(messenger, "telegram:c1")
        after_new = turn(messenger, "telegram:c1:2")  # /new between turns: another session
        child = dataclasses.replace(after_new, session_id="task:telegram:c1:2:call-1")
        for ctx in (first, first, after_new, after_new, child):
            await tool.run(SendArgs(text="note"), ctx)
    async with Database(path) as db:  # a restart
        messenger = messenger_on(db, clock, sink)
        ctx = turn(messenger, "task:telegram:c1:2:call-2")
        await tool.run(SendArgs(text="sixth"), ctx)
        with pytest.raises(ToolError, match=RATE_LIMIT + r" .* try again in 60s"):
            await tool.run(SendArgs(text="seventh"), ctx)
        clock.at += timedelta(seconds=60)
        assert await tool.run(SendArgs(text="a minute later"), ctx) == "Sent to telegram:c1."
    assert [m.text for m in sink.handed] == ["note"] * 5 + ["sixth", "a minute later"]


async def test_the_target_chat_has_the_same_limit_whoever_sends(tmp_path: Path) -> None:
    tool = SendSessionMessageTool(allow_targets=["telegram:shared"])
    clock, sink = Clock(), Sink()
    to_shared = SendArgs(text="hi", channel="telegram", chat_id="shared")
    async with Database(tmp_path / "db.sqlite") as db:
        messenger = messenger_on(db, clock, sink)
        for n in range(6):
            await tool.run(to_shared, turn(messenger, f"telegram:u{n}", f"u{n}", f"u{n}"))
        with pytest.raises(ToolError, match=RATE_LIMIT):
            await tool.run(to_shared, turn(messenger, "telegram:u9", "u9", "u9"))
        # the senders themselves still have room, in their own chats
        assert await tool.run(SendArgs(text="x"), turn(messenger, "telegram:u0", "u0", "u0"))
    assert len(sink.handed) == 7
