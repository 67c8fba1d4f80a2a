"""Feishu long-connection mode against the fake's endpoint + protobuf websocket."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from channels.feishu import FeishuChannel, FeishuConfig
from channels.feishu.webhook import WEBHOOK_PATH
from gateway.bus import InboundMessage, MessageBus, Receipt
from tests.channel_runtime import channel_runtime
from tests.fakes.feishu_server import (
    BOT_OPEN_ID,
    FakeFeishu,
    config_dict,
    mention,
    message_event,
)


@pytest.fixture
async def fake() -> AsyncIterator[FakeFeishu]:
    async with FakeFeishu(ping_interval=120) as server:
        yield server


# Pings every 0.1 s make a connection "silent" after 0.3 s, which a slow CI
# machine can reach while rendering one traceback; only the tests about pings
# and silence use them.
FAST_PINGS = 0.1


def ws_channel(fake: FakeFeishu, **overrides: Any) -> FeishuChannel:
    settings: dict[str, Any] = {
        "ws_ping_interval_secs": 5.0,
        "ws_reconnect_base_secs": 0.05,
        "ws_reconnect_max_secs": 0.2,
        **overrides,
    }
    return FeishuChannel(FeishuConfig(**config_dict(fake.base_url, **settings)))


async def test_default_mode_is_long_connection(fake: FakeFeishu) -> None:
    config = FeishuConfig(**config_dict(fake.base_url))
    assert config.mode.value == "ws"


async def test_p2p_message_recorded_then_acked(fake: FakeFeishu, tmp_path: Path) -> None:
    channel = ws_channel(fake)
    async with channel_runtime(channel, tmp_path) as rt:
        assert channel.not_ready_reason is None  # start() returned connected
        event = message_event("hi over ws", sender="ou_carol", chat_id="oc_p2p")
        frame_id = await fake.push_event(event)
        await fake.wait_until(lambda: frame_id in fake.acks)
        # The ack came only after the message was recorded.
        [msg] = rt.received
    assert fake.acks[frame_id] == 200
    assert (msg.text, msg.sender_id, msg.chat_id) == ("hi over ws", "ou_carol", "oc_p2p")
    assert msg.message_id == event["header"]["event_id"]


async def test_pings_are_sent_at_the_configured_interval(fake: FakeFeishu, tmp_path: Path) -> None:
    channel = ws_channel(fake, ws_ping_interval_secs=FAST_PINGS)
    async with channel_runtime(channel, tmp_path):
        await fake.wait_until(lambda: fake._conns[-1].pings >= 3)
        # waited for, not asserted: a loop stalled 3 fast intervals on a loaded machine reconnects
        await fake.wait_until(lambda: channel.ready)


async def test_chunked_event_is_reassembled(fake: FakeFeishu, tmp_path: Path) -> None:
    channel = ws_channel(fake)
    async with channel_runtime(channel, tmp_path) as rt:
        long_text = "chunked " * 300
        frame_id = await fake.push_event(message_event(long_text), chunks=3)
        [msg] = await rt.wait_for_messages(1)
        await fake.wait_until(lambda: frame_id in fake.acks)
    assert msg.text == long_text.strip()


async def test_group_messages_say_whether_they_mention_the_bot_over_ws(
    fake: FakeFeishu, tmp_path: Path
) -> None:
    # The adapter records both; the gateway's access policy ignores the chatter
    # (groups.require_mention), tests/e2e/test_feishu.py.
    channel = ws_channel(fake)
    async with channel_runtime(channel, tmp_path) as rt:
        chatter = await fake.push_event(message_event("chatter", chat_type="group"))
        mentioned = message_event(
            "@_user_1 hello there",
            chat_type="group",
            mentions=[mention("@_user_1", BOT_OPEN_ID, "picobot")],
        )
        await fake.push_event(mentioned)
        messages = await rt.wait_for_messages(2)
    assert fake.acks[chatter] == 200
    assert [(m.text, m.addressed) for m in messages] == [("chatter", False), ("hello there", True)]


async def test_same_event_four_times_recorded_once(fake: FakeFeishu, tmp_path: Path) -> None:
    channel = ws_channel(fake)
    async with channel_runtime(channel, tmp_path) as rt:
        event = message_event("once")
        frames = [await fake.push_event(event) for _ in range(4)]
        await fake.push_event(message_event("twice"))
        messages = await rt.wait_for_messages(2)
        await fake.wait_until(lambda: all(f in fake.acks for f in frames))
    assert [m.text for m in messages] == ["once", "twice"]
    assert {fake.acks[f] for f in frames} == {200}


async def test_silent_connection_is_detected_and_replaced(fake: FakeFeishu, tmp_path: Path) -> None:
    channel = ws_channel(fake, ws_ping_interval_secs=FAST_PINGS)
    async with channel_runtime(channel, tmp_path) as rt:
        assert fake.connections == 1
        fake.go_silent()
        # 3 ping intervals (0.3 s) without traffic → reconnect.
        # (>= 2: a loaded machine may stall the loop past 0.3 s once more)
        await fake.wait_until(lambda: fake.connections >= 2 and fake.live_connections == 1, 3.0)
        frame_id = await fake.push_event(message_event("after the silence"))
        [msg] = await rt.wait_for_messages(1)
        await fake.wait_until(lambda: frame_id in fake.acks)
        await fake.wait_until(lambda: channel.ready)
    assert msg.text == "after the silence"


async def test_handshake_rejection_is_reported_then_recovers(
    fake: FakeFeishu, tmp_path: Path
) -> None:
    fake.reject_handshake = {
        "handshake-status": "514",
        "handshake-msg": "auth failed",
        "handshake-autherrcode": "1000040351",
    }
    channel = ws_channel(fake)
    async with channel_runtime(channel, tmp_path) as rt:
        reason = channel.not_ready_reason
        assert reason is not None
        assert "handshake failed" in reason
        assert "authentication failed" in reason
        fake.reject_handshake = None
        await fake.wait_until(lambda: fake.connections == 1, 3.0)
        await fake.push_event(message_event("recovered"))
        [msg] = await rt.wait_for_messages(1)
        assert channel.ready
    assert msg.text == "recovered"


async def test_bad_credentials_are_reported(fake: FakeFeishu, tmp_path: Path) -> None:
    settings = config_dict(fake.base_url, app_secret="wrong", ws_reconnect_base_secs=0.05)
    channel = FeishuChannel(FeishuConfig(**settings))
    async with channel_runtime(channel, tmp_path):
        assert channel.not_ready_reason is not None
        assert "1000040344" in channel.not_ready_reason
        assert "wrong" not in channel.not_ready_reason
    assert fake.connections == 0


async def test_stop_closes_the_connection(fake: FakeFeishu, tmp_path: Path) -> None:
    channel = ws_channel(fake)
    async with channel_runtime(channel, tmp_path):
        await fake.wait_until(lambda: fake.live_connections == 1)
    await fake.wait_until(lambda: fake.live_connections == 0)
    assert channel.not_ready_reason == "stopped"


async def test_no_webhook_route_in_long_connection_mode(fake: FakeFeishu, tmp_path: Path) -> None:
    channel = ws_channel(fake)
    async with (
        channel_runtime(channel, tmp_path) as rt,
        aiohttp.ClientSession() as session,
        session.post(rt.base_url + WEBHOOK_PATH, json=message_event("sneaky")) as resp,
    ):
        assert resp.status == 404
        assert rt.received == []


class BrokenBus(MessageBus):
    """A bus whose recording fails, as when storage is down."""

    async def submit(self, message: InboundMessage) -> Receipt:
        raise RuntimeError("inbox write failed")


async def test_failed_recording_acks_500_then_redelivery_succeeds(
    fake: FakeFeishu, tmp_path: Path
) -> None:
    channel = ws_channel(fake)
    async with channel_runtime(channel, tmp_path) as rt:
        real_bus = rt.bus
        rt.bus = BrokenBus()
        event = message_event("try again later")
        failed = await fake.push_event(event)
        await fake.wait_until(lambda: failed in fake.acks)
        assert fake.acks[failed] == 500
        assert rt.received == []
        rt.bus = real_bus
        retried = await fake.push_event(event)  # Feishu redelivers the same event
        await fake.wait_until(lambda: retried in fake.acks)
    assert fake.acks[retried] == 200
    assert [m.text for m in rt.received] == ["try again later"]


class ClosingBus(MessageBus):
    """A bus that is shutting down; notes that a submit was refused."""

    def __init__(self) -> None:
        super().__init__()
        self.close()
        self.refused = asyncio.Event()

    async def submit(self, message: InboundMessage) -> Receipt:
        self.refused.set()
        return await super().submit(message)


async def test_no_ack_while_shutting_down(fake: FakeFeishu, tmp_path: Path) -> None:
    channel = ws_channel(fake)
    async with channel_runtime(channel, tmp_path) as rt:
        real_bus, closing = rt.bus, ClosingBus()
        rt.bus = closing
        unacked = await fake.push_event(message_event("during shutdown"))
        await asyncio.wait_for(closing.refused.wait(), 5)
        rt.bus = real_bus
        later = await fake.push_event(message_event("after"))
        # Events are handled in order: once the later one is acked, the first is done.
        await fake.wait_until(lambda: later in fake.acks)
    assert unacked not in fake.acks
    assert [m.text for m in rt.received] == ["after"]
