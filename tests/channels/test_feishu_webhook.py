"""Feishu webhook mode against the fake Open Platform: the real channel behind a real HTTP route."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from channels.feishu import FeishuChannel, FeishuConfig
from channels.feishu.webhook import WEBHOOK_PATH
from gateway.bus import ChatType, InboundMessage, MediaKind, MessageBus, Receipt
from tests.channel_runtime import channel_runtime
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


@pytest.fixture
async def fake() -> AsyncIterator[FakeFeishu]:
    async with FakeFeishu() as server:
        yield server


def webhook_channel(fake: FakeFeishu, **overrides: Any) -> FeishuChannel:
    settings = {"mode": "webhook", "verification_token": VERIFICATION_TOKEN, **overrides}
    return FeishuChannel(FeishuConfig(**config_dict(fake.base_url, **settings)))


async def test_p2p_message_is_recorded_and_acknowledged(fake: FakeFeishu, tmp_path: Path) -> None:
    channel = webhook_channel(fake)
    async with channel_runtime(channel, tmp_path) as rt:
        sender = EventSender(rt.base_url + WEBHOOK_PATH)
        event = message_event("hello bot", sender="ou_alice", chat_id="oc_dm")
        status, body = await sender.post(event)
        assert (status, body) == (200, {"msg": "success"})
        [msg] = await rt.wait_for_messages(1)
    assert channel.ready is False  # stopped now
    assert msg.channel == "feishu"
    assert msg.text == "hello bot"
    assert msg.chat_id == "oc_dm"
    assert msg.sender_id == "ou_alice"
    assert msg.chat_type is ChatType.DIRECT
    assert msg.message_id == event["header"]["event_id"]
    assert msg.metadata["feishu_message_id"] == event["event"]["message"]["message_id"]


async def test_ready_in_webhook_mode_and_bot_identified(fake: FakeFeishu, tmp_path: Path) -> None:
    channel = webhook_channel(fake)
    async with channel_runtime(channel, tmp_path):
        assert channel.not_ready_reason is None
        assert await channel.bot_open_id() == BOT_OPEN_ID
    assert ("GET", "/open-apis/bot/v3/info") in fake.requests


async def test_url_verification_plain_and_encrypted(fake: FakeFeishu, tmp_path: Path) -> None:
    plain = webhook_channel(fake)
    async with channel_runtime(plain, tmp_path) as rt:
        status, body = await EventSender(rt.base_url + WEBHOOK_PATH).url_verification("c-1")
        assert (status, body) == (200, {"challenge": "c-1"})
        status, _ = await EventSender(rt.base_url + WEBHOOK_PATH).url_verification("c", "wrong")
        assert status == 401
    encrypted = webhook_channel(fake, encrypt_key=ENCRYPT_KEY)
    async with channel_runtime(encrypted, tmp_path) as rt:
        sender = EventSender(rt.base_url + WEBHOOK_PATH, encrypt_key=ENCRYPT_KEY)
        status, body = await sender.url_verification("c-2")
        assert (status, body) == (200, {"challenge": "c-2"})


@pytest.mark.parametrize("lower_headers", [False, True])
async def test_encrypted_signed_delivery_is_recorded(
    fake: FakeFeishu, tmp_path: Path, lower_headers: bool
) -> None:
    channel = webhook_channel(fake, encrypt_key=ENCRYPT_KEY)
    async with channel_runtime(channel, tmp_path) as rt:
        sender = EventSender(rt.base_url + WEBHOOK_PATH, ENCRYPT_KEY, lower_headers=lower_headers)
        status, body = await sender.post(message_event("secret hello"))
        assert (status, body) == (200, {"msg": "success"})
        [msg] = await rt.wait_for_messages(1)
    assert msg.text == "secret hello"


async def test_bad_or_missing_signature_gets_401_and_nothing_recorded(
    fake: FakeFeishu, tmp_path: Path
) -> None:
    channel = webhook_channel(fake, encrypt_key=ENCRYPT_KEY)
    async with channel_runtime(channel, tmp_path) as rt:
        sender = EventSender(rt.base_url + WEBHOOK_PATH, ENCRYPT_KEY)
        assert (await sender.post(message_event("forged"), bad_signature=True))[0] == 401
        assert (await sender.post(message_event("unsigned"), sign=False))[0] == 401
        # A good one afterwards is the only thing recorded.
        assert (await sender.post(message_event("genuine")))[0] == 200
        messages = await rt.wait_for_messages(1)
    assert [m.text for m in messages] == ["genuine"]


async def test_wrong_verification_token_gets_401(fake: FakeFeishu, tmp_path: Path) -> None:
    channel = webhook_channel(fake)
    async with channel_runtime(channel, tmp_path) as rt:
        sender = EventSender(rt.base_url + WEBHOOK_PATH)
        assert (await sender.post(message_event("x", token="nope")))[0] == 401
        assert (await sender.post(message_event("ok")))[0] == 200
        messages = await rt.wait_for_messages(1)
    assert [m.text for m in messages] == ["ok"]


async def test_event_delivered_four_times_is_recorded_once(
    fake: FakeFeishu, tmp_path: Path
) -> None:
    channel = webhook_channel(fake)
    async with channel_runtime(channel, tmp_path) as rt:
        sender = EventSender(rt.base_url + WEBHOOK_PATH)
        event = message_event("only once")
        assert await sender.replay(event, 4) == [200, 200, 200, 200]
        assert (await sender.post(message_event("next")))[0] == 200
        messages = await rt.wait_for_messages(2)
    assert [m.text for m in messages] == ["only once", "next"]


async def test_repush_with_new_ids_is_ignored_by_content_guard(
    fake: FakeFeishu, tmp_path: Path
) -> None:
    channel = webhook_channel(fake)
    async with channel_runtime(channel, tmp_path) as rt:
        sender = EventSender(rt.base_url + WEBHOOK_PATH)
        first = message_event("same words", create_time="1700000000000")
        again = message_event("same words", create_time="1700000000000")  # new ids
        assert (await sender.post(first))[0] == 200
        assert (await sender.post(again))[0] == 200
        assert (await sender.post(message_event("different"))) == (200, {"msg": "success"})
        messages = await rt.wait_for_messages(2)
    assert [m.text for m in messages] == ["same words", "different"]


async def test_group_messages_carry_the_mention_and_it_is_stripped(
    fake: FakeFeishu, tmp_path: Path
) -> None:
    channel = webhook_channel(fake)
    async with channel_runtime(channel, tmp_path) as rt:
        sender = EventSender(rt.base_url + WEBHOOK_PATH)
        unmentioned = message_event("just chatting", chat_type="group", chat_id="oc_g")
        assert (await sender.post(unmentioned))[0] == 200
        mentioned = message_event(
            "@_user_1 what is up with @_user_2?",
            chat_type="group",
            chat_id="oc_g",
            mentions=[
                mention("@_user_1", BOT_OPEN_ID, "picobot"),
                mention("@_user_2", "ou_bob", "Bob"),
            ],
        )
        assert (await sender.post(mentioned))[0] == 200
        messages = await rt.wait_for_messages(2)
    chatter, msg = messages
    # whether to answer is the gateway's access policy (groups.require_mention)
    assert (chatter.text, chatter.addressed) == ("just chatting", False)
    assert msg.text == "what is up with @Bob?"
    assert msg.chat_type is ChatType.GROUP
    assert msg.mentions == ("ou_bob",)
    assert msg.addressed


async def test_every_sender_is_recorded_with_their_other_ids(
    fake: FakeFeishu, tmp_path: Path
) -> None:
    # allow_from is the gateway's access policy now, not the adapter's
    channel = webhook_channel(fake, allow_from=["ou_friend"])
    async with channel_runtime(channel, tmp_path) as rt:
        sender = EventSender(rt.base_url + WEBHOOK_PATH)
        assert (await sender.post(message_event("let me in", sender="ou_stranger")))[0] == 200
        assert (await sender.post(message_event("hi", sender="ou_friend")))[0] == 200
        messages = await rt.wait_for_messages(2)
    assert [(m.sender_id, m.text) for m in messages] == [
        ("ou_stranger", "let me in"),
        ("ou_friend", "hi"),
    ]
    assert messages[0].sender_aliases == ("u_ou_stranger", "on_x")  # user_id, union_id
    assert all(m.addressed for m in messages)  # private chats


async def test_image_bytes_are_downloaded(fake: FakeFeishu, tmp_path: Path) -> None:
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(200))
    fake.add_resource("om_img1", "img_key_1", png, "image/png", "cat.png")
    channel = webhook_channel(fake)
    async with channel_runtime(channel, tmp_path) as rt:
        sender = EventSender(rt.base_url + WEBHOOK_PATH)
        event = message_event(
            msg_type="image", content={"image_key": "img_key_1"}, message_id="om_img1"
        )
        assert (await sender.post(event))[0] == 200
        [msg] = await rt.wait_for_messages(1)
    [media] = msg.media
    assert media.kind is MediaKind.IMAGE
    assert media.mime_type == "image/png"
    assert Path(media.path).read_bytes() == png
    assert Path(media.path).parent == tmp_path / "feishu"


async def test_reply_context_is_fetched_and_cut(fake: FakeFeishu, tmp_path: Path) -> None:
    fake.messages["om_parent"] = ("text", {"text": "the original question, quite long"})
    channel = webhook_channel(fake, reply_context_max_chars=21)
    async with channel_runtime(channel, tmp_path) as rt:
        sender = EventSender(rt.base_url + WEBHOOK_PATH)
        assert (await sender.post(message_event("and?", parent_id="om_parent")))[0] == 200
        [msg] = await rt.wait_for_messages(1)
    assert msg.reply_to == "the original question"


async def test_other_event_types_are_acknowledged_and_ignored(
    fake: FakeFeishu, tmp_path: Path
) -> None:
    channel = webhook_channel(fake)
    async with channel_runtime(channel, tmp_path) as rt:
        sender = EventSender(rt.base_url + WEBHOOK_PATH)
        other = message_event("x")
        other["header"]["event_type"] = "im.chat.member.bot.added_v1"
        assert await sender.post(other) == (200, {"msg": "success"})
        assert (await sender.post(message_event("real")))[0] == 200
        messages = await rt.wait_for_messages(1)
    assert [m.text for m in messages] == ["real"]


async def test_v1_envelope_is_accepted(fake: FakeFeishu, tmp_path: Path) -> None:
    channel = webhook_channel(fake)
    v1 = {
        "uuid": "v1-event-1",
        "token": VERIFICATION_TOKEN,
        "ts": "1700000000.1",
        "type": "event_callback",
        "event": {
            "type": "message",
            "msg_type": "text",
            "chat_type": "private",
            "open_id": "ou_old",
            "open_chat_id": "oc_old",
            "open_message_id": "om_old",
            "text": "legacy hello",
            "text_without_at_bot": "legacy hello",
        },
    }
    async with channel_runtime(channel, tmp_path) as rt:
        assert (await EventSender(rt.base_url + WEBHOOK_PATH).post(v1))[0] == 200
        [msg] = await rt.wait_for_messages(1)
    assert (msg.message_id, msg.chat_id, msg.text) == ("v1-event-1", "oc_old", "legacy hello")


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        b"[1, 2]",
        json.dumps({"schema": "2.0", "event": {}}).encode(),
        b"x" * 1_100_000,
        b"[" * 20_000
        + b"]" * 20_000,  # json raises RecursionError on it, before any signature check
    ],
    ids=["not-json", "not-object", "no-header", "oversize", "too-deep"],
)
async def test_malformed_or_oversize_bodies_get_400(
    fake: FakeFeishu, tmp_path: Path, raw: bytes
) -> None:
    channel = webhook_channel(fake)
    async with channel_runtime(channel, tmp_path) as rt:
        sender = EventSender(rt.base_url + WEBHOOK_PATH)
        assert (await sender.post(raw))[0] == 400
        assert (await sender.post(message_event("still alive")))[0] == 200
        messages = await rt.wait_for_messages(1)
    assert [m.text for m in messages] == ["still alive"]


async def test_undecryptable_body_gets_400(fake: FakeFeishu, tmp_path: Path) -> None:
    channel = webhook_channel(fake, encrypt_key=ENCRYPT_KEY)
    async with channel_runtime(channel, tmp_path) as rt:
        wrong_key = EventSender(rt.base_url + WEBHOOK_PATH, encrypt_key="another key")
        assert (await wrong_key.post(message_event("x"), sign=False))[0] == 400
        assert rt.received == []


async def test_no_ack_when_the_bus_is_closed(fake: FakeFeishu, tmp_path: Path) -> None:
    channel = webhook_channel(fake)
    async with channel_runtime(channel, tmp_path) as rt:
        rt.bus.close()
        status, _ = await EventSender(rt.base_url + WEBHOOK_PATH).post(message_event("late"))
        assert status == 503
        await asyncio.sleep(0)
        assert rt.received == []


async def test_media_too_large_or_missing_is_noted_not_fatal(
    fake: FakeFeishu, tmp_path: Path
) -> None:
    fake.add_resource("om_big", "big_key", b"x" * 5000, "application/pdf", "big.pdf")
    channel = webhook_channel(fake, max_media_bytes=1024)
    async with channel_runtime(channel, tmp_path) as rt:
        sender = EventSender(rt.base_url + WEBHOOK_PATH)
        big = message_event(
            msg_type="file",
            content={"file_key": "big_key", "file_name": "big.pdf"},
            message_id="om_big",
        )
        missing = message_event(msg_type="image", content={"image_key": "nope"})
        assert (await sender.post(big))[0] == 200
        assert (await sender.post(missing))[0] == 200
        messages = await rt.wait_for_messages(2)
    assert [m.media for m in messages] == [(), ()]
    assert messages[0].text == "[file: big.pdf]\n[file could not be downloaded]"
    assert messages[1].text == "[image]\n[image could not be downloaded]"
    assert not (tmp_path / "feishu").exists() or not any((tmp_path / "feishu").iterdir())


class BrokenBus(MessageBus):
    async def submit(self, message: InboundMessage) -> Receipt:
        raise RuntimeError("inbox write failed")


async def test_failed_recording_is_not_acknowledged(fake: FakeFeishu, tmp_path: Path) -> None:
    channel = webhook_channel(fake)
    async with channel_runtime(channel, tmp_path) as rt:
        real_bus = rt.bus
        rt.bus = BrokenBus()
        sender = EventSender(rt.base_url + WEBHOOK_PATH)
        event = message_event("retry me")
        status, body = await sender.post(event)
        assert status == 500
        assert body != {"msg": "success"}
        rt.bus = real_bus
        assert (await sender.post(event))[0] == 200  # Feishu's redelivery is recorded
        [msg] = await rt.wait_for_messages(1)
    assert msg.text == "retry me"


async def test_redelivered_image_event_is_downloaded_once(fake: FakeFeishu, tmp_path: Path) -> None:
    fake.add_resource("om_img2", "img_key_2", b"\x89PNG-bytes", "image/png", "a.png")
    channel = webhook_channel(fake)
    async with channel_runtime(channel, tmp_path) as rt:
        sender = EventSender(rt.base_url + WEBHOOK_PATH)
        event = message_event(
            msg_type="image", content={"image_key": "img_key_2"}, message_id="om_img2"
        )
        assert await sender.replay(event, 4) == [200] * 4
        [msg] = await rt.wait_for_messages(1)
    downloads = [r for r in fake.requests if r[1].endswith("/resources/img_key_2")]
    assert len(downloads) == 1
    assert len(msg.media) == 1
