"""WeChat context tokens against a fake iLink that expires them and limits their
sends the way the platform does: refresh through getconfig, a send budget per
token, ret -2 restricting the user until their next message, typing-ticket TTL."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from channels.base import RecipientOffline
from channels.wechat import WechatChannel
from gateway.bus import ChannelEvent, EventKind, OutboundMessage
from tests.channels.test_wechat_support import make_config, wechat_runtime, write_credentials
from tests.fakes.wechat_server import FakeWechat

ALICE = "alice@im.wechat"


class Clock:
    """Wall time shared by the fake and the channel, moved by the test."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def reply(text: str, n: int) -> OutboundMessage:
    message = OutboundMessage("wechat", ALICE, text, outbox_id=n)
    return dataclasses.replace(message, idempotency_key=f"row{n}")


async def test_a_reply_200_s_after_the_message_goes_with_a_refreshed_token(
    tmp_path: Path,
) -> None:
    clock = Clock()
    async with FakeWechat(clock=clock, context_ttl_secs=120) as fake:
        write_credentials(tmp_path, fake)
        channel = WechatChannel(make_config(fake), clock=clock)
        async with wechat_runtime(channel, tmp_path) as rt:
            await fake.add_message(ALICE, "think about it for a while")
            await rt.wait_for_messages(1)
            inbound_token = fake.latest_tokens[ALICE]
            clock.now += 200  # a long agent turn: the inbound token has expired
            await channel.send(reply("here is my answer", 1))
            [sent] = fake.sent
            assert sent.text == "here is my answer"
            assert sent.context_token != inbound_token
            assert sent.context_token == fake.latest_tokens[ALICE]  # the one getconfig gave
            assert fake.refused == []
            assert fake.discarded == []
            assert fake.protocol_errors == []
            # the refreshed token is stored: a restart would send with it too
            assert fake.latest_tokens[ALICE] in rt.state.values[f"context_token:{ALICE}"]


async def test_a_fresh_token_is_not_refreshed(tmp_path: Path) -> None:
    clock = Clock()
    async with FakeWechat(clock=clock) as fake:
        write_credentials(tmp_path, fake)
        channel = WechatChannel(make_config(fake, typing=False), clock=clock)
        async with wechat_runtime(channel, tmp_path) as rt:
            await fake.add_message(ALICE, "quick one")
            await rt.wait_for_messages(1)
            clock.now += 5
            await channel.send(reply("quick answer", 1))
        assert fake.tickets_issued == []  # no getconfig for a token 5 s old
        assert [m.text for m in fake.sent] == ["quick answer"]


async def test_many_parts_stay_within_the_per_token_send_budget(tmp_path: Path) -> None:
    clock = Clock()
    async with FakeWechat(clock=clock, sends_per_token=3) as fake:
        write_credentials(tmp_path, fake)
        channel = WechatChannel(
            make_config(fake, context_max_sends=3, max_message_chars=100), clock=clock
        )
        async with wechat_runtime(channel, tmp_path) as rt:
            await fake.add_message(ALICE, "write a lot")
            await rt.wait_for_messages(1)
            text = " ".join(f"word{i:03d}" for i in range(80))  # 639 chars: 7 parts
            await channel.send(reply(text, 1))
            await channel.send(reply("and a scheduled note", 2))
        assert len(fake.sent) == 8
        assert fake.refused == []
        assert len({m.context_token for m in fake.sent}) == 3  # refreshed twice along the way


async def test_ret_minus_2_restricts_the_user_until_their_next_message(tmp_path: Path) -> None:
    async with FakeWechat() as fake:
        write_credentials(tmp_path, fake)
        channel = WechatChannel(make_config(fake))
        async with wechat_runtime(channel, tmp_path) as rt:
            await fake.add_message(ALICE, "hello")
            await rt.wait_for_messages(1)
            fake.send_rets = [{"ret": -2, "errmsg": "context restricted"}]
            with pytest.raises(RecipientOffline, match="next message"):
                await channel.send(reply("parked", 1))
            assert rt.online == []
            await fake.replay(fake.stream[0])  # a replay is not the user writing again
            await fake.add_message(ALICE, "are you there?")
            await rt.wait_for_messages(2)
            assert rt.online == [ALICE]  # the parked reply may go now, once
            await fake.add_message(ALICE, "and again")
            await rt.wait_for_messages(3)
            assert rt.online == [ALICE]  # no restriction left: nothing to release


async def test_typing_ticket_is_fetched_again_after_its_ttl(tmp_path: Path) -> None:
    clock = Clock()
    async with FakeWechat(clock=clock) as fake:
        write_credentials(tmp_path, fake)
        channel = WechatChannel(make_config(fake, typing_ticket_ttl_secs=100), clock=clock)
        async with wechat_runtime(channel, tmp_path) as rt:
            await fake.add_message(ALICE, "think")
            await rt.wait_for_messages(1)

            def event(kind: EventKind) -> ChannelEvent:
                return ChannelEvent(kind, "wechat", ALICE, "wechat:" + ALICE, "run-1")

            await channel.notify(event(EventKind.WORKING))
            await fake.wait_for(lambda: len(fake.typing) >= 2)
            assert len(fake.tickets_issued) == 1  # kept while young
            clock.now += 101
            await fake.wait_for(lambda: len(fake.tickets_issued) == 2)
            await channel.notify(event(EventKind.IDLE))
            # the typing getconfig refreshed the context token: a reply still goes out
            await channel.send(reply("done", 1))
        assert fake.typing[-1] == (ALICE, 2)
        assert [m.text for m in fake.sent] == ["done"]
        assert fake.discarded == []
        assert fake.protocol_errors == []
