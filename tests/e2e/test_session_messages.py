"""send_session_message through the whole gateway (docs/subagents.md): the fake
LLM calls it; the fake Telegram Bot API and the WebSocket client receive it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agent.messages import Marker, Role
from agent.subagents.types import child_session_id
from gateway.app import Gateway
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.support import make_config, running_gateway, ws_client

ADMIN_CHAT = "boss"  # a WebSocket sender's id is its chat id (no tokens configured)


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


def config(home: Path, llm: FakeOpenAI, tg: FakeTelegram, **tools: Any) -> Any:
    return make_config(
        home,
        llm.base_url,
        channels={"telegram": tg.settings()},
        gateway={"admins": [f"websocket:{ADMIN_CHAT}"], "outbound_retry_base_secs": 0.05},
        tools={"send_session_message": tools} if tools else {},
    )


def results(llm: FakeOpenAI) -> list[str]:
    last = llm.requests[-1]["messages"]
    return [str(m["content"]) for m in last if m["role"] == "tool"]


def script_notes(llm: FakeOpenAI, count: int, then: str) -> None:
    """The model sends `count` notes to the current chat, one a round, then says `then`."""
    for n in range(count):
        llm.add_tool_call("send_session_message", {"text": f"note {n}"})
    llm.add_text(then)


async def session_notes(gw: Gateway, session_id: str) -> list[str]:
    assert gw.store is not None
    history = await gw.store.transcripts.session_messages(session_id)
    return [
        m.content
        for m in history
        if m.role is Role.ASSISTANT and m.marker == Marker.SESSION_MESSAGE.value
    ]


async def test_an_admin_messages_another_telegram_chat(
    home: Path, llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    llm.add_tool_call(
        "send_session_message", {"text": "dinner at 7", "channel": "telegram", "chat_id": "777"}
    )
    llm.add_text("told them")
    async with (
        running_gateway(config(home, llm, tg)) as gw,
        ws_client(gw, ADMIN_CHAT) as client,
    ):
        assert await client.ask("tell 777 dinner is at 7") == "told them"
        await tg.wait_for(lambda: "dinner at 7" in tg.sent_texts, timeout=10)
        notes = await session_notes(gw, "telegram:777")
    assert results(llm) == ["Sent to telegram:777."]
    [sent] = [c for c in tg.calls_of("sendMessage") if c.params["text"] == "dinner at 7"]
    assert sent.params["chat_id"] == "777"
    assert notes == ["dinner at 7"]


async def test_a_non_admin_may_only_reach_listed_targets(
    home: Path, llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    for chat in ("777", "888"):
        llm.add_tool_call(
            "send_session_message", {"text": f"hi {chat}", "channel": "telegram", "chat_id": chat}
        )
    llm.add_text("tried")
    async with (
        running_gateway(config(home, llm, tg, allow_targets=["telegram:888"])) as gw,
        ws_client(gw, "someone") as client,
    ):
        assert await client.ask("message them") == "tried"
        await tg.wait_for(lambda: "hi 888" in tg.sent_texts, timeout=10)
        refused_notes = await session_notes(gw, "telegram:777")
    refused, allowed = results(llm)
    assert refused.startswith("Error: not allowed to message telegram:777")
    assert allowed == "Sent to telegram:888."
    assert "hi 777" not in tg.sent_texts
    assert refused_notes == []


async def test_the_current_chat_gets_a_separate_message_before_the_reply(
    home: Path, llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    llm.add_tool_call("send_session_message", {"text": "working on it"})
    llm.add_text("all done")
    async with (
        running_gateway(config(home, llm, tg)) as gw,
        ws_client(gw, "here") as client,
    ):
        await client.send("do it")
        first = await client.recv_type("message")
        second = await client.recv_type("message")
        notes = await session_notes(gw, "here")
        assert await client.ask("and then?") == "echo: and then?"
    assert (first["text"], second["text"]) == ("working on it", "all done")
    assert notes == ["working on it"]
    # next turn: the note follows the batch's result (nothing may sit between a
    # tool call and its result), and the model sees it as said
    roles = [
        (m["role"], bool(m.get("tool_calls")), m.get("content"))
        for m in llm.requests[-1]["messages"]
        if m["role"] != "system"
    ]
    assert roles == [
        ("user", False, "do it"),
        ("assistant", True, None),
        ("tool", False, "Sent to websocket:here."),
        ("assistant", False, "working on it"),
        ("assistant", False, "all done"),
        ("user", False, "and then?"),
    ]


async def test_the_seventh_message_in_a_minute_is_refused(
    home: Path, llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    script_notes(llm, 7, then="enough")
    async with (
        running_gateway(config(home, llm, tg)) as gw,
        ws_client(gw, "chatty") as client,
    ):
        assert await client.ask("spam me") == "enough"
        notes = await session_notes(gw, "chatty")
    outcomes = results(llm)
    assert outcomes[:6] == ["Sent to websocket:chatty."] * 6
    assert outcomes[6].startswith("Error: rate limit: at most 6 session messages per minute")
    assert notes == [f"note {n}" for n in range(6)]


async def outbox_notes(gw: Gateway, chat_id: str) -> list[str]:
    assert gw.db is not None
    rows = await gw.db.read(
        lambda c: c.execute(
            "SELECT text FROM outbox WHERE chat_id = ? ORDER BY id", (chat_id,)
        ).fetchall()
    )
    return [r[0] for r in rows if r[0].startswith("note ")]


async def test_the_limit_is_the_senders_across_new_sessions_and_task_children(
    home: Path, llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    script_notes(llm, 2, then="two sent")  # in the first session
    llm.add_tool_call("task", {"description": "a", "prompt": "send two"}, call_id="ta")
    script_notes(llm, 2, then="child a done")
    llm.add_tool_call("task", {"description": "b", "prompt": "send three"}, call_id="tb")
    script_notes(llm, 3, then="child b done")  # its third is the seventh in the minute
    llm.add_text("children done")
    async with (
        running_gateway(config(home, llm, tg)) as gw,
        ws_client(gw, "sender") as client,
    ):
        assert await client.ask("two notes") == "two sent"
        await client.ask("/new")
        assert await client.ask("now with children") == "children done"
        assert gw.store is not None
        session = await gw.store.active_session("websocket", "sender")
        assert session is not None
        assert session.id != "sender"  # /new made a second session
        child_b = await gw.store.transcripts.session_messages(child_session_id(session.id, "tb"))
        sent = await outbox_notes(gw, "sender")
    outcomes = [m.content for m in child_b if m.role is Role.TOOL]
    assert outcomes[:2] == ["Sent to websocket:sender."] * 2
    assert outcomes[2].startswith("Error: rate limit: at most 6 session messages per minute")
    assert sent == ["note 0", "note 1"] * 3


async def test_a_channel_that_is_not_enabled_is_an_error(
    home: Path, llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    llm.add_tool_call("send_session_message", {"text": "x", "channel": "feishu", "chat_id": "oc_1"})
    llm.add_text("could not")
    async with (
        running_gateway(config(home, llm, tg)) as gw,
        ws_client(gw, ADMIN_CHAT) as client,
    ):
        assert await client.ask("try feishu") == "could not"
    assert results(llm) == ["Error: channel 'feishu' is not enabled in this gateway"]


async def test_the_rate_window_survives_a_restart(
    home: Path, llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    script_notes(llm, 6, then="six sent")
    async with running_gateway(config(home, llm, tg)) as gw, ws_client(gw, "again") as client:
        assert await client.ask("spam me") == "six sent"
    llm.add_tool_call("send_session_message", {"text": "one more"})
    llm.add_text("that one was refused")
    async with running_gateway(config(home, llm, tg)) as gw, ws_client(gw, "again") as client:
        assert await client.ask("and one more") == "that one was refused"
        notes = await session_notes(gw, "again")
    assert results(llm)[-1].startswith("Error: rate limit: at most 6 session messages per minute")
    assert notes == [f"note {n}" for n in range(6)]
