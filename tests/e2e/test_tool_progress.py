"""`show_tool_results`: a turn's tool calls in the chat while it runs, end to end
over Telegram, Feishu, WeChat and the WebSocket (fake platforms, real gateway)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from channels.feishu import FeishuChannel
from channels.telegram import TelegramChannel
from tests.channels.test_wechat_support import write_credentials
from tests.e2e.test_telegram import telegram_config
from tests.e2e.test_wechat import ALICE, wechat_config
from tests.fakes.feishu_server import FakeFeishu, config_dict, message_event
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.fakes.wechat_server import FakeWechat
from tests.support import (
    child_env,
    conversation,
    make_config,
    running_gateway,
    spawn_gateway,
    ws_client,
)

REPLY = "6*7 is 42, and 42+1 is 43."
DONE = re.compile(r"^🔧 calculator\(expression=(6\*7|42\+1)\) ✓ ok \d+\.\ds$")


def two_calculations(llm: FakeOpenAI) -> None:
    """A turn with two tool calls, one per round, then the reply."""
    llm.add_tool_call("calculator", {"expression": "6*7"})
    llm.add_tool_call("calculator", {"expression": "42+1"})
    llm.add_text(REPLY)


def both_done(text: str) -> bool:
    lines = text.splitlines()
    return len(lines) == 2 and all(DONE.match(line) for line in lines)


@pytest.fixture
def fast_progress(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(TelegramChannel, "progress_interval_secs", 0.05)
    monkeypatch.setattr(FeishuChannel, "progress_interval_secs", 0.05)


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


@pytest.mark.usefixtures("fast_progress")
async def test_telegram_shows_both_calls_in_one_edited_message_then_the_reply(
    home: Path, llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    two_calculations(llm)
    # the channel's own key (Feishu and the WebSocket below use the gateway's)
    async with running_gateway(telegram_config(home, llm, tg, show_tool_results=True)):
        await tg.add_message("what are 6*7 and 42+1?", chat_id=42, user_id=42)
        await tg.wait_for(lambda: REPLY in tg.sent_texts, timeout=10)

        def final_edit() -> bool:
            edits = tg.calls_of("editMessageText")
            return bool(edits) and both_done(edits[-1].params["text"])

        await tg.wait_for(final_edit, timeout=10)
    progress, reply = tg.sent_texts  # nothing else was sent
    assert reply == REPLY
    # posted when the first call started (it may have ended by the time the post went out)
    assert progress.startswith("🔧 calculator(expression=6*7) ")
    assert "42+1" not in progress
    [posted] = [c for c in tg.calls_of("sendMessage") if c.params["text"] == progress]
    assert "parse_mode" not in posted.params  # plain text: arguments are not markup
    edits = tg.calls_of("editMessageText")
    assert {e.params["message_id"] for e in edits} == {posted.params["_message_id"]}
    # in call order, each line replaced in place as its call ended
    assert edits[-1].params["text"].splitlines()[0].startswith("🔧 calculator(expression=6*7)")


async def test_by_default_telegram_gets_nothing_but_the_reply(
    home: Path, llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    two_calculations(llm)
    async with running_gateway(telegram_config(home, llm, tg)):
        await tg.add_message("what are 6*7 and 42+1?", chat_id=42, user_id=42)
        await tg.wait_for(lambda: len(tg.sent_texts) >= 1, timeout=10)
    assert tg.sent_texts == [REPLY]
    assert tg.calls_of("editMessageText") == []
    assert len(llm.requests) == 3  # the tools did run


@pytest.mark.parametrize("show", [False, True])
async def test_the_websocket_sends_tool_frames_whatever_the_setting(
    home: Path, llm: FakeOpenAI, show: bool
) -> None:
    two_calculations(llm)
    loaded = make_config(home, llm.base_url, gateway={"show_tool_results": show})
    async with running_gateway(loaded) as gw, ws_client(gw) as ws:
        msg_id = await ws.send("what are 6*7 and 42+1?")
        frames: list[dict[str, Any]] = []
        while not (frames and frames[-1]["type"] == "message"):
            frame = await ws.recv()
            if frame["type"] in ("tool", "message"):
                frames.append(frame)
    *tools, reply = frames
    assert (reply["reply_to"], reply["text"]) == (msg_id, REPLY)
    assert [(f["name"], f["summary"], f["status"]) for f in tools] == [
        ("calculator", "expression=6*7", "running"),
        ("calculator", "expression=6*7", "ok"),
        ("calculator", "expression=42+1", "running"),
        ("calculator", "expression=42+1", "ok"),
    ]
    assert tools[0]["id"] == tools[1]["id"] != tools[2]["id"] == tools[3]["id"]
    assert tools[0]["secs"] is None
    assert isinstance(tools[1]["secs"], float)
    assert {f["session_id"] for f in tools} == {reply["session_id"]}
    assert len({f["run_id"] for f in tools}) == 1


async def test_the_welcome_frame_says_whether_to_show_tool_calls(
    home: Path, llm: FakeOpenAI
) -> None:
    import json

    import websockets

    for show, expected in ((None, False), (True, True)):
        channel: dict[str, Any] = {} if show is None else {"show_tool_results": show}
        loaded = make_config(home, llm.base_url, channels={"websocket": channel})
        async with (
            running_gateway(loaded) as gw,
            websockets.connect(f"ws://127.0.0.1:{gw.port}/ws") as ws,
        ):
            await ws.send(json.dumps({"type": "hello", "protocol": 1, "chat_id": "c"}))
            welcome = json.loads(await ws.recv())
        welcome.pop("commands")  # the command list (tested with the web UI)
        assert welcome == {
            "type": "welcome",
            "protocol": 1,
            "chat_id": "c",
            "show_tool_results": expected,
        }


@pytest.mark.usefixtures("fast_progress")
async def test_feishu_shows_the_calls_in_one_card_updated_in_place(
    home: Path, llm: FakeOpenAI
) -> None:
    two_calculations(llm)
    async with FakeFeishu() as fs:
        section = config_dict(fs.base_url, ws_ping_interval_secs=5.0)
        loaded = make_config(
            home,
            llm.base_url,
            channels={"websocket": {"enabled": False}, "feishu": section},
            gateway={"show_tool_results": True},
        )
        async with running_gateway(loaded):
            await fs.push_event(message_event("what are 6*7 and 42+1?", message_id="om_q"))
            await fs.wait_until(
                lambda: (
                    any(s.text == REPLY for s in fs.sent)
                    and any(both_done(s.text) for s in fs.sent)
                ),
                10,
            )
    card, reply = fs.sent
    assert (card.kind, card.target, card.msg_type) == ("reply", "om_q", "interactive")
    assert card.content["config"]["update_multi"] is True
    assert (reply.kind, reply.target, reply.text) == ("reply", "om_q", REPLY)
    assert fs.patches
    assert {mid for mid, _ in fs.patches} == {card.message_id}


async def test_wechat_gets_the_calls_in_one_message_before_the_reply(
    home: Path, llm: FakeOpenAI
) -> None:
    two_calculations(llm)
    async with FakeWechat() as fake:
        write_credentials(home, fake)
        loaded = wechat_config(home, llm, fake, show_tool_results=True)
        async with running_gateway(loaded):
            await fake.add_message(ALICE, "what are 6*7 and 42+1?")
            await fake.wait_for(lambda: len(fake.sent) >= 2, timeout=10)
        progress, reply = (m.text for m in fake.sent)
    assert both_done(progress)
    assert reply == REPLY


async def test_a_configured_secret_never_reaches_the_chat(
    home: Path, llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    """The real `picobot gateway` (which registers the config's secrets): the
    secret is written by one tool call and read back by another."""
    secret = "zq-configured-secret-0123456789"  # no known token pattern: only the registry knows it
    llm.add_tool_call("write", {"path": "notes.txt", "content": f"the key is {secret}"})
    llm.add_tool_call("read", {"path": "notes.txt"})
    llm.add_text("Saved and checked.")
    config = {
        "providers": {"default": {"base_url": llm.base_url, "api_key": secret}},
        "models": {"default": {"model_id": "fake-model"}},
        "gateway": {"port": 0, "show_tool_results": True},
        "channels": {"websocket": {"enabled": False}, "telegram": tg.settings()},
    }
    gw = await spawn_gateway(config, home, child_env(home))
    try:
        await tg.add_message("keep my key in notes.txt", chat_id=42, user_id=42)
        await tg.wait_for(lambda: "Saved and checked." in tg.sent_texts, timeout=20)

        def final_edit() -> bool:
            edits = tg.calls_of("editMessageText")
            return bool(edits) and edits[-1].params["text"].count(" ✓ ok ") == 2

        await tg.wait_for(final_edit, timeout=20)
    finally:
        assert await gw.stop() == 0
    read_back = conversation(llm.requests[2])[-1]
    assert read_back["role"] == "tool"
    assert secret in read_back["content"]  # the model did get the result
    shown = [c.params.get("text", "") for c in tg.calls if c.method != "getUpdates"]
    assert all(secret not in text for text in shown)
    lines = tg.calls_of("editMessageText")[-1].params["text"].splitlines()
    assert lines[0].startswith("🔧 write(path=notes.txt, content=the key is ***) ✓ ok")
    assert lines[1].startswith("🔧 read(path=notes.txt) ✓ ok")
