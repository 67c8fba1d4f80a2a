"""Feishu end to end: fake Open Platform → real gateway (storage, agent, outbox) → fake LLM."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from channels.feishu.webhook import WEBHOOK_PATH
from gateway.config.loading import LoadedConfig
from tests.fakes.feishu_server import (
    BOT_OPEN_ID,
    ENCRYPT_KEY,
    VERIFICATION_TOKEN,
    EventSender,
    FakeFeishu,
    config_dict,
    mention,
    message_event,
)
from tests.fakes.openai_server import FakeOpenAI
from tests.support import make_config, newest, running_gateway


@pytest.fixture
async def fs() -> AsyncIterator[FakeFeishu]:
    async with FakeFeishu() as fake:
        yield fake


def feishu_config(home: Path, llm: FakeOpenAI, fs: FakeFeishu, **overrides: Any) -> LoadedConfig:
    settings: dict[str, Any] = {
        # Slow pings: with fast ones a slow machine could see a busy connection
        # as silent. The silence test sets its own.
        "ws_ping_interval_secs": 5.0,
        "ws_reconnect_base_secs": 0.05,
        "ws_reconnect_max_secs": 0.2,
        **overrides,
    }
    section = config_dict(fs.base_url, **settings)
    return make_config(
        home,
        llm.base_url,
        channels={"websocket": {"enabled": False}, "feishu": section},
        gateway={"outbound_retry_base_secs": 0.05},
    )


def webhook_overrides() -> dict[str, Any]:
    return {
        "mode": "webhook",
        "encrypt_key": ENCRYPT_KEY,
        "verification_token": VERIFICATION_TOKEN,
    }


async def test_webhook_message_gets_a_reply_through_the_reply_api(
    home: Path, llm: FakeOpenAI, fs: FakeFeishu
) -> None:
    async with running_gateway(feishu_config(home, llm, fs, **webhook_overrides())) as gw:
        assert gw.readiness() == []
        sender = EventSender(gw.base_url + WEBHOOK_PATH, ENCRYPT_KEY)
        event = message_event("hello feishu", message_id="om_hello", chat_id="oc_dm")
        assert await sender.post(event) == (200, {"msg": "success"})
        await fs.wait_until(lambda: len(fs.sent) >= 1, 10)
    [sent] = fs.sent
    assert (sent.kind, sent.target, sent.text) == ("reply", "om_hello", "echo: hello feishu")
    assert newest(llm.requests[0])["content"] == "hello feishu"


async def test_long_connection_message_gets_a_reply(
    home: Path, llm: FakeOpenAI, fs: FakeFeishu
) -> None:
    async with running_gateway(feishu_config(home, llm, fs)) as gw:
        assert gw.readiness() == []
        frame_id = await fs.push_event(message_event("over the long connection"))
        await fs.wait_until(lambda: frame_id in fs.acks and len(fs.sent) >= 1, 10)
    assert fs.acks[frame_id] == 200
    assert [s.text for s in fs.sent] == ["echo: over the long connection"]


async def test_event_delivered_four_times_is_answered_once(
    home: Path, llm: FakeOpenAI, fs: FakeFeishu
) -> None:
    async with running_gateway(feishu_config(home, llm, fs, **webhook_overrides())) as gw:
        sender = EventSender(gw.base_url + WEBHOOK_PATH, ENCRYPT_KEY)
        event = message_event("say it once")
        assert await sender.replay(event, 4) == [200] * 4
        assert (await sender.post(message_event("and then this")))[0] == 200
        await fs.wait_until(lambda: len(fs.sent) >= 2, 10)
    assert sorted(s.text for s in fs.sent) == ["echo: and then this", "echo: say it once"]
    assert len(llm.requests) == 2


async def test_image_bytes_reach_the_llm(home: Path, llm: FakeOpenAI, fs: FakeFeishu) -> None:
    png = b"\x89PNG\r\n\x1a\nfake-png-payload"
    fs.add_resource("om_pic", "img_v3_pic", png, "image/png", "pic.png")
    llm.add_text("A nice picture.")
    async with running_gateway(feishu_config(home, llm, fs)):
        event = message_event(
            msg_type="image", content={"image_key": "img_v3_pic"}, message_id="om_pic"
        )
        await fs.push_event(event)
        await fs.wait_until(lambda: len(fs.sent) >= 1, 10)
    assert fs.sent[0].text == "A nice picture."
    content = newest(llm.requests[0])["content"]
    images = [p["image_url"]["url"] for p in content if p["type"] == "image_url"]
    assert images == [f"data:image/png;base64,{base64.b64encode(png).decode()}"]


async def test_group_message_needs_a_mention(home: Path, llm: FakeOpenAI, fs: FakeFeishu) -> None:
    async with running_gateway(feishu_config(home, llm, fs)):
        ignored = await fs.push_event(message_event("side chatter", chat_type="group"))
        await fs.wait_until(lambda: ignored in fs.acks, 10)
        event = message_event(
            "@_user_1 summarise please",
            chat_type="group",
            chat_id="oc_group",
            mentions=[mention("@_user_1", BOT_OPEN_ID, "picobot")],
        )
        await fs.push_event(event)
        await fs.wait_until(lambda: len(fs.sent) >= 1, 10)
    assert [s.text for s in fs.sent] == ["echo: summarise please"]
    assert len(llm.requests) == 1


async def test_typing_reaction_while_the_turn_runs(
    home: Path, llm: FakeOpenAI, fs: FakeFeishu
) -> None:
    async with running_gateway(feishu_config(home, llm, fs)):
        llm.hold()
        await fs.push_event(message_event("take your time", message_id="om_slow"))
        await fs.wait_until(lambda: ("add", "om_slow", "Typing") in fs.reactions, 10)
        assert not any(op == "delete" for op, _, _ in fs.reactions)
        llm.release()
        await fs.wait_until(lambda: any(op == "delete" for op, _, _ in fs.reactions), 10)
        await fs.wait_until(lambda: len(fs.sent) >= 1, 10)
    assert fs.sent[0].text == "echo: take your time"


async def test_silent_long_connection_recovers_and_next_event_is_answered(
    home: Path, llm: FakeOpenAI, fs: FakeFeishu
) -> None:
    async with running_gateway(feishu_config(home, llm, fs, ws_ping_interval_secs=0.2)) as gw:
        fs.go_silent()
        await fs.wait_until(lambda: fs.connections == 2 and fs.live_connections == 1, 5)
        await fs.push_event(message_event("still there?"))
        await fs.wait_until(lambda: len(fs.sent) >= 1, 10)
        assert gw.readiness() == []
    assert fs.sent[0].text == "echo: still there?"


async def test_reply_to_a_withdrawn_message_goes_through_the_send_api(
    home: Path, llm: FakeOpenAI, fs: FakeFeishu
) -> None:
    async with running_gateway(feishu_config(home, llm, fs)):
        await fs.push_event(message_event("quick, before I delete it", message_id="om_gone_1"))
        await fs.wait_until(lambda: len(fs.sent) >= 1, 10)
    [sent] = fs.sent
    assert (sent.kind, sent.target, sent.id_type) == ("send", "oc_chat1", "chat_id")
    assert sent.text == "echo: quick, before I delete it"


async def test_ready_reports_a_rejected_long_connection(
    home: Path, llm: FakeOpenAI, fs: FakeFeishu
) -> None:
    fs.reject_handshake = {"handshake-status": "403", "handshake-msg": "app not allowed"}
    async with running_gateway(feishu_config(home, llm, fs)) as gw:
        [reason] = gw.readiness()
        assert reason.startswith("channel feishu: feishu long connection handshake failed")
        assert "app not allowed" in reason
        fs.reject_handshake = None
        await fs.wait_until(lambda: fs.connections == 1, 5)
        frame_id = await fs.push_event(message_event("now connected"))
        await fs.wait_until(lambda: frame_id in fs.acks, 10)
        assert gw.readiness() == []


async def test_redelivery_after_a_restart_is_not_answered_again(
    home: Path, llm: FakeOpenAI, fs: FakeFeishu
) -> None:
    loaded = feishu_config(home, llm, fs, **webhook_overrides())
    event = message_event("remember me across restarts")
    async with running_gateway(loaded) as gw:
        sender = EventSender(gw.base_url + WEBHOOK_PATH, ENCRYPT_KEY)
        assert (await sender.post(event))[0] == 200
        await fs.wait_until(lambda: len(fs.sent) >= 1, 10)
    async with running_gateway(loaded) as gw:  # a new process: only the inbox remembers
        sender = EventSender(gw.base_url + WEBHOOK_PATH, ENCRYPT_KEY)
        assert (await sender.post(event))[0] == 200
        assert (await sender.post(message_event("a new question")))[0] == 200
        await fs.wait_until(lambda: len(fs.sent) >= 2, 10)
    assert [s.text for s in fs.sent] == [
        "echo: remember me across restarts",
        "echo: a new question",
    ]
    assert len(llm.requests) == 2


async def test_an_interactive_card_reaches_the_model_with_its_text(
    home: Path, llm: FakeOpenAI, fs: FakeFeishu
) -> None:
    card = {
        "title": "Incident 42",
        "elements": [[{"tag": "text", "text": "Database latency above 2 s"}]],
    }
    async with running_gateway(feishu_config(home, llm, fs)):
        await fs.push_event(message_event(msg_type="interactive", content=card))
        await fs.wait_until(lambda: len(fs.sent) >= 1, 10)
    assert newest(llm.requests[0])["content"] == "Incident 42\nDatabase latency above 2 s"


async def test_a_merged_forward_reaches_the_model_with_the_messages_it_carries(
    home: Path, llm: FakeOpenAI, fs: FakeFeishu
) -> None:
    fs.add_forward(
        "om_fwd",
        [("text", {"text": "are we shipping today?"}), ("text", {"text": "yes, at five"})],
    )
    async with running_gateway(feishu_config(home, llm, fs)):
        event = message_event(
            msg_type="merge_forward", content={"content": "Merged"}, message_id="om_fwd"
        )
        await fs.push_event(event)
        await fs.wait_until(lambda: len(fs.sent) >= 1, 10)
    assert newest(llm.requests[0])["content"] == (
        "[merged forward]\n- are we shipping today?\n- yes, at five"
    )
