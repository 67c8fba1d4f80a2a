"""Feishu outbound and the Open API client against the fake: send, reply, post,
idempotency, splitting, token cache, rate limits, the typing reaction."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from channels.base import PermanentSendError, RateLimited
from channels.feishu import FeishuChannel, FeishuConfig
from channels.feishu.api import FeishuApi
from channels.feishu.webhook import WEBHOOK_PATH
from gateway.bus import ChannelEvent, EventKind, OutboundMessage
from tests.channel_runtime import channel_runtime
from tests.fakes.feishu_server import (
    APP_ID,
    APP_SECRET,
    EventSender,
    FakeFeishu,
    config_dict,
    message_event,
)


@pytest.fixture
async def fake() -> AsyncIterator[FakeFeishu]:
    async with FakeFeishu() as server:
        yield server


def channel_for(fake: FakeFeishu, **overrides: Any) -> FeishuChannel:
    return FeishuChannel(FeishuConfig(**config_dict(fake.base_url, mode="webhook", **overrides)))


def out(text: str, **kw: Any) -> OutboundMessage:
    return OutboundMessage(channel="feishu", chat_id=kw.pop("chat_id", "oc_chat1"), text=text, **kw)


async def test_send_text_to_chat(fake: FakeFeishu, tmp_path: Path) -> None:
    channel = channel_for(fake, card_replies=False)
    async with channel_runtime(channel, tmp_path):
        result = await channel.send(out("plain answer", outbox_id=7, idempotency_key="k7"))
    [sent] = fake.sent
    assert (sent.kind, sent.target, sent.id_type) == ("send", "oc_chat1", "chat_id")
    assert (sent.msg_type, sent.content) == ("text", {"text": "plain answer"})
    assert sent.uuid == "pb-k7-0-t"
    assert result.platform_message_ids == (sent.message_id,)


async def test_a_reply_is_a_card_with_one_markdown_element(
    fake: FakeFeishu, tmp_path: Path
) -> None:
    channel = channel_for(fake)
    text = "# Title\n\nSome **bold** words."
    async with channel_runtime(channel, tmp_path):
        await channel.send(out(text, outbox_id=7, idempotency_key="k7"))
    [sent] = fake.sent
    assert sent.msg_type == "interactive"
    assert sent.content["elements"] == [{"tag": "markdown", "content": text}]
    assert sent.uuid == "pb-k7-0"
    assert fake.rejected == []


async def test_a_rejected_card_is_delivered_as_plain_text_once(
    fake: FakeFeishu, tmp_path: Path
) -> None:
    fake.reject_cards = True
    channel = channel_for(fake)
    async with channel_runtime(channel, tmp_path) as rt:
        event = message_event("question", message_id="om_question")
        assert (await EventSender(rt.base_url + WEBHOOK_PATH).post(event))[0] == 200
        [msg] = await rt.wait_for_messages(1)
        reply = out("**bold** answer", reply_to_message_id=msg.message_id, idempotency_key="k1")
        first = await channel.send(reply)
        again = await channel.send(reply)  # the dispatcher's retry of the same row
    [sent] = fake.sent
    assert (sent.kind, sent.target, sent.msg_type) == ("reply", "om_question", "text")
    assert sent.text == "**bold** answer"
    assert [t for t, _ in fake.rejected] == ["interactive", "interactive"]
    assert fake.duplicates == [sent.uuid]  # the retry was not shown twice
    assert first == again


async def test_reply_to_inbound_message_by_its_event_id(fake: FakeFeishu, tmp_path: Path) -> None:
    channel = channel_for(fake)
    async with channel_runtime(channel, tmp_path) as rt:
        event = message_event("question", message_id="om_question")
        assert (await EventSender(rt.base_url + WEBHOOK_PATH).post(event))[0] == 200
        [msg] = await rt.wait_for_messages(1)
        await channel.send(out("answer", reply_to_message_id=msg.message_id, outbox_id=1))
    [sent] = fake.sent
    assert (sent.kind, sent.target, sent.text) == ("reply", "om_question", "answer")


async def test_reply_to_a_gone_message_falls_back_to_the_chat(
    fake: FakeFeishu, tmp_path: Path
) -> None:
    channel = channel_for(fake)
    async with channel_runtime(channel, tmp_path):
        await channel.send(out("still delivered", reply_to_message_id="om_gone_1", outbox_id=2))
    [sent] = fake.sent
    assert (sent.kind, sent.target, sent.text) == ("send", "oc_chat1", "still delivered")


async def test_markdown_and_paragraphs_go_out_as_post(fake: FakeFeishu, tmp_path: Path) -> None:
    channel = channel_for(fake, card_replies=False)
    text = "# Title\n\nSome **bold** words.\n\n- one\n- two"
    async with channel_runtime(channel, tmp_path):
        await channel.send(out(text, outbox_id=3))
    [sent] = fake.sent
    assert sent.msg_type == "post"
    assert sent.content == {"zh_cn": {"title": "", "content": [[{"tag": "md", "text": text}]]}}


async def test_long_text_split_in_order_with_stable_uuids(fake: FakeFeishu, tmp_path: Path) -> None:
    channel = channel_for(fake, max_message_chars=100)
    words = " ".join(f"w{i:03d}" for i in range(60))  # 299 chars → 3 parts
    async with channel_runtime(channel, tmp_path):
        first = await channel.send(out(words, outbox_id=9, idempotency_key="k9"))
        again = await channel.send(out(words, outbox_id=9, attempt=2, idempotency_key="k9"))
    assert [s.uuid for s in fake.sent] == ["pb-k9-0", "pb-k9-1", "pb-k9-2"]
    assert all(len(s.text) <= 100 for s in fake.sent)
    assert " ".join(s.text for s in fake.sent) == words
    assert first == again  # Feishu deduplicated the retry by uuid: nothing shown twice


async def test_rate_limit_is_retried_then_succeeds(fake: FakeFeishu, tmp_path: Path) -> None:
    fake.fail_next("POST", "/open-apis/im/v1/messages", code=99991400)
    fake.fail_next("POST", "/open-apis/im/v1/messages", code=0, status=429)
    api = FeishuApi(fake.base_url, APP_ID, SecretStr(APP_SECRET), retry_base_secs=0.01)
    await api.open()
    try:
        message_id = await api.send_message(
            "oc_x", "text", '{"text":"hi"}', None, id_type="chat_id"
        )
    finally:
        await api.close()
    assert message_id == fake.sent[0].message_id
    assert [r for r in fake.requests if r[1] == "/open-apis/im/v1/messages"] == [
        ("POST", "/open-apis/im/v1/messages")
    ] * 3


async def test_rate_limit_exhausted_raises_rate_limited(fake: FakeFeishu) -> None:
    for _ in range(3):
        fake.fail_next("POST", "/open-apis/im/v1/messages", code=99991403)
    api = FeishuApi(
        fake.base_url, APP_ID, SecretStr(APP_SECRET), max_retries=2, retry_base_secs=0.01
    )
    await api.open()
    try:
        with pytest.raises(RateLimited) as caught:
            await api.send_message("oc_x", "text", '{"text":"hi"}', None, id_type="chat_id")
    finally:
        await api.close()
    assert caught.value.retry_after > 0
    assert fake.sent == []


async def test_token_is_cached_and_refreshed_before_expiry(fake: FakeFeishu) -> None:
    api = FeishuApi(fake.base_url, APP_ID, SecretStr(APP_SECRET))
    await api.open()
    try:
        first = await api.tenant_token()
        assert await api.tenant_token() == first  # cached
        assert fake.token_requests == 1
        fake.token_expire = 0  # the next token is already due for refresh
        api.invalidate_token()
        short = await api.tenant_token()
        assert await api.tenant_token() != short  # refreshed, not reused past expiry
    finally:
        await api.close()
    assert fake.token_requests == 3


async def test_tokens_are_per_instance(fake: FakeFeishu) -> None:
    one = FeishuApi(fake.base_url, APP_ID, SecretStr(APP_SECRET))
    two = FeishuApi(fake.base_url, APP_ID, SecretStr(APP_SECRET))
    await one.open()
    await two.open()
    try:
        assert await one.tenant_token() != await two.tenant_token()
    finally:
        await one.close()
        await two.close()


async def test_bad_app_secret_is_permanent_and_not_leaked(fake: FakeFeishu) -> None:
    api = FeishuApi(fake.base_url, APP_ID, SecretStr("super-secret-value"))
    await api.open()
    try:
        with pytest.raises(PermanentSendError) as caught:
            await api.tenant_token()
    finally:
        await api.close()
    assert "super-secret-value" not in str(caught.value)
    assert "10014" in str(caught.value)


async def test_send_to_a_user_by_open_id(fake: FakeFeishu, tmp_path: Path) -> None:
    channel = channel_for(fake)
    async with channel_runtime(channel, tmp_path):
        await channel.send(out("direct", chat_id="ou_someone", outbox_id=4))
    assert (fake.sent[0].target, fake.sent[0].id_type) == ("ou_someone", "open_id")


async def test_typing_reaction_added_on_working_removed_on_idle(
    fake: FakeFeishu, tmp_path: Path
) -> None:
    channel = channel_for(fake, reaction_emoji="Typing")
    async with channel_runtime(channel, tmp_path) as rt:
        event = message_event("think hard", message_id="om_think")
        assert (await EventSender(rt.base_url + WEBHOOK_PATH).post(event))[0] == 200
        [msg] = await rt.wait_for_messages(1)

        def signal(kind: EventKind) -> ChannelEvent:
            return ChannelEvent(kind, "feishu", msg.chat_id, "s1", "r1", "", msg.message_id)

        await channel.notify(signal(EventKind.WORKING))
        await fake.wait_until(lambda: ("add", "om_think", "Typing") in fake.reactions)
        reaction_id = next(x for op, _, x in fake.reactions if op == "id")
        await channel.notify(signal(EventKind.IDLE))
        await fake.wait_until(lambda: ("delete", "om_think", reaction_id) in fake.reactions)
    assert [op for op, _, _ in fake.reactions] == ["add", "id", "delete"]


async def test_notify_swallows_delivery_errors(fake: FakeFeishu, tmp_path: Path) -> None:
    fake.fail_next("POST", "/open-apis/im/v1/messages/om_x/reactions", code=231001)
    channel = channel_for(fake)
    async with channel_runtime(channel, tmp_path):
        working = ChannelEvent(EventKind.WORKING, "feishu", "oc_chat1", "s", "r", "", "om_x")
        await channel.notify(working)
        await channel.notify(
            ChannelEvent(EventKind.IDLE, "feishu", "oc_chat1", "s", "r", "", "om_x")
        )
        await fake.wait_until(lambda: not fake._failures)
    assert fake.reactions == []


def test_post_content_is_valid_json_for_feishu() -> None:
    from channels.feishu.outbound import render

    msg_type, content = render("line one\n\nline two")
    assert msg_type == "post"
    assert json.loads(content)["zh_cn"]["content"][0][0]["tag"] == "md"
    assert render("just a sentence.")[0] == "text"


def test_post_over_feishus_size_cap_goes_out_as_text() -> None:
    from channels.feishu.outbound import render

    big = "## 标题\n\n" + "很长的回答。" * 2000  # ~36 KB of UTF-8
    msg_type, content = render(big)
    assert msg_type == "text"
    assert json.loads(content) == {"text": big}


async def test_streaming_updates_one_card_and_the_reply_lands_in_it(
    fake: FakeFeishu, tmp_path: Path
) -> None:
    channel = channel_for(fake, streaming=True)
    assert channel.capabilities.can_stream
    async with channel_runtime(channel, tmp_path) as rt:
        event = message_event("tell me", message_id="om_ask")
        assert (await EventSender(rt.base_url + WEBHOOK_PATH).post(event))[0] == 200
        [msg] = await rt.wait_for_messages(1)

        def delta(text: str) -> ChannelEvent:
            return ChannelEvent(
                EventKind.DELTA, "feishu", msg.chat_id, "s1", "run-1", text, msg.message_id
            )

        await channel.notify(delta("Once upon"))
        await fake.wait_until(lambda: len(fake.sent) == 1)
        await channel.notify(delta(" a time"))
        await fake.wait_until(lambda: bool(fake.patches))
        final = out(
            "Once upon a time, **the end**.",
            reply_to_message_id=msg.message_id,
            run_id="run-1",
            idempotency_key="k-stream",
        )
        first = await channel.send(final)
        again = await channel.send(final)  # a retry of the same row
    [card] = fake.sent
    assert (card.kind, card.target, card.msg_type) == ("reply", "om_ask", "interactive")
    assert card.content["elements"] == [{"tag": "markdown", "content": final.text}]
    assert [p[1]["elements"][0]["content"] for p in fake.patches][-1] == final.text
    assert first.platform_message_ids == again.platform_message_ids == (card.message_id,)
