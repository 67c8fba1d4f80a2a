"""WechatChannel against the fake iLink server: receive, reply, replay, −14, restart, split."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import aiohttp
import pytest
import structlog
import structlog.testing

from channels.base import PermanentSendError, RecipientOffline, TransientSendError
from channels.wechat import WechatChannel
from channels.wechat.api import ILinkClient
from channels.wechat.credentials import load_credentials
from channels.wechat.poller import CURSOR_KEY, EXPIRED_REASON, NOT_LOGGED_IN_REASON
from gateway.bus import ChannelEvent, ChatType, EventKind, OutboundMessage
from tests.channels.test_wechat_support import (
    CountingBus,
    eventually,
    make_config,
    wechat_runtime,
    write_credentials,
)
from tests.fakes.wechat_server import FakeWechat

ALICE = "alice@im.wechat"
BOB = "bob@im.wechat"


def reply(text: str, outbox_id: int | None = 1, chat_id: str = ALICE) -> OutboundMessage:
    """An outbox row's message: its key follows the row id, as the row stores it."""
    message = OutboundMessage(channel="wechat", chat_id=chat_id, text=text, outbox_id=outbox_id)
    if outbox_id is None:
        return message
    return dataclasses.replace(message, idempotency_key=f"row{outbox_id}")


async def test_message_recorded_and_reply_carries_that_users_context_token(
    tmp_path: Path,
) -> None:
    async with FakeWechat() as fake:
        write_credentials(tmp_path, fake)
        channel = WechatChannel(make_config(fake))
        async with wechat_runtime(channel, tmp_path) as rt:
            assert channel.ready
            assert fake.notifications == ["start"]
            await fake.add_message(BOB, "from bob")
            sent = await fake.add_message(ALICE, "hello bot")
            [first, second] = await rt.wait_for_messages(2)
            assert (second.chat_id, second.sender_id, second.text) == (ALICE, ALICE, "hello bot")
            assert second.message_id == sent["message_id"]
            assert second.chat_type is ChatType.DIRECT
            assert first.chat_id == BOB

            result = await channel.send(reply("hi alice"))
            await channel.send(reply("hi bob", outbox_id=2, chat_id=BOB))
            assert [(m.to_user_id, m.text) for m in fake.sent] == [
                (ALICE, "hi alice"),
                (BOB, "hi bob"),
            ]
            assert fake.sent[0].context_token == fake.latest_tokens[ALICE]
            assert fake.sent[1].context_token == fake.latest_tokens[BOB]
            assert fake.discarded == []
            assert result.platform_message_ids == (fake.sent[0].message_id,)

            # a newer message brings a newer token, and the reply follows it
            await fake.add_message(ALICE, "again")
            await rt.wait_for_messages(3)
            await channel.send(reply("hi again", outbox_id=3))
            assert fake.sent[-1].context_token == fake.latest_tokens[ALICE]
            assert fake.discarded == []
            assert fake.protocol_errors == []
        assert fake.notifications == ["start", "stop"]
        assert rt.state.values[CURSOR_KEY] == "buf-3"


async def test_fake_silently_discards_a_send_without_the_latest_token(tmp_path: Path) -> None:
    """The check above can fail: the fake notices a stale or missing token."""
    async with FakeWechat() as fake, aiohttp.ClientSession() as session:
        await fake.add_message(ALICE, "one")
        client = ILinkClient(session, fake.base_url, token=fake.token)
        await client.send_text(to_user_id=ALICE, client_id="c1", text="x", context_token="stale")
        assert fake.sent == []
        assert [d.client_id for d in fake.discarded] == ["c1"]


async def test_replayed_message_is_recorded_and_submitted_once(tmp_path: Path) -> None:
    async with FakeWechat() as fake:
        write_credentials(tmp_path, fake)
        channel = WechatChannel(make_config(fake))
        async with wechat_runtime(channel, tmp_path) as rt:
            first = await fake.add_message(ALICE, "once")
            await rt.wait_for_messages(1)
            await fake.replay(first)  # minutes later, in a new batch
            await fake.add_message(ALICE, "twice")
            messages = await rt.wait_for_messages(2)
            assert [m.text for m in messages] == ["once", "twice"]
            assert isinstance(rt.bus, CountingBus)
            assert [m.text for m in rt.bus.submitted] == ["once", "twice"]


async def test_dedup_key_falls_back_to_client_id_then_seq(tmp_path: Path) -> None:
    async with FakeWechat() as fake:
        write_credentials(tmp_path, fake)
        channel = WechatChannel(make_config(fake))
        async with wechat_runtime(channel, tmp_path) as rt:
            a = await fake.add_message(ALICE, "no id", message_id="")
            b = await fake.add_message(ALICE, "no ids", message_id="", client_id="")
            await fake.replay(a)
            await fake.replay(b)
            await fake.add_message(ALICE, "last")
            messages = await rt.wait_for_messages(3)
            assert [m.message_id for m in messages[:2]] == [
                f"client:{a['client_id']}",
                f"seq:{b['seq']}",
            ]
            assert [m.text for m in messages] == ["no id", "no ids", "last"]


async def test_session_expired_sets_reason_pauses_polling_and_sends_still_work(
    tmp_path: Path,
) -> None:
    async with FakeWechat() as fake:
        cred_path = write_credentials(tmp_path, fake)
        channel = WechatChannel(make_config(fake, session_pause_secs=60))
        async with wechat_runtime(channel, tmp_path) as rt:
            await fake.add_message(ALICE, "before")
            await rt.wait_for_messages(1)
            await fake.script_updates({"ret": -14, "errcode": -14, "errmsg": "session timeout"})
            await eventually(lambda: channel.not_ready_reason == EXPIRED_REASON)
            polls = len(fake.updates_requests)

            await channel.send(reply("still delivered"))
            assert [m.text for m in fake.sent] == ["still delivered"]
            saved = load_credentials(cred_path)
            assert saved is not None
            assert saved.expired
            assert len(fake.updates_requests) == polls  # polling is paused

            # the operator logs in again: a new token on disk resumes polling
            fake.token = "ilinkbot_new"
            write_credentials(tmp_path, fake)
            await fake.add_message(ALICE, "after")
            messages = await rt.wait_for_messages(2)
            assert messages[-1].text == "after"
            await eventually(lambda: channel.ready)
            await channel.send(reply("with the new token", outbox_id=2))
            assert fake.sent[-1].text == "with the new token"


async def test_restart_resumes_from_the_cursor_without_loss_or_duplicates(
    tmp_path: Path,
) -> None:
    async with FakeWechat() as fake:
        write_credentials(tmp_path, fake)
        first = WechatChannel(make_config(fake))
        async with wechat_runtime(first, tmp_path) as rt1:
            await fake.add_message(ALICE, "m1")
            await fake.add_message(ALICE, "m2")
            await rt1.wait_for_messages(2)
            await eventually(lambda: rt1.state.values.get(CURSOR_KEY) == "buf-2")
        await fake.add_message(ALICE, "m3")  # arrives while we are down
        seen = len(fake.updates_requests)

        second = WechatChannel(make_config(fake))
        async with wechat_runtime(second, tmp_path, dict(rt1.state.values)) as rt2:
            await fake.add_message(ALICE, "m4")
            messages = await rt2.wait_for_messages(2)
            assert [m.text for m in messages] == ["m3", "m4"]
            assert fake.updates_requests[seen] == "buf-2"
            # the context token survived the restart: a reply still reaches alice
            await channel_send_ok(second, fake)
        assert [m.text for m in rt1.received + rt2.received] == ["m1", "m2", "m3", "m4"]


async def channel_send_ok(channel: WechatChannel, fake: FakeWechat) -> None:
    await channel.send(reply("after restart", outbox_id=99))
    assert fake.sent[-1].context_token == fake.latest_tokens[ALICE]


async def test_cursor_does_not_move_when_the_gateway_stops_taking_messages(
    tmp_path: Path,
) -> None:
    async with FakeWechat() as fake:
        write_credentials(tmp_path, fake)
        channel = WechatChannel(make_config(fake))
        async with wechat_runtime(channel, tmp_path) as rt:
            rt.bus.close()
            await fake.add_message(ALICE, "not lost")
            await fake.wait_for(lambda: len(fake.updates_requests) >= 1)
            poll_task = channel._poll_task
            assert poll_task is not None
            await eventually(poll_task.done)
            assert CURSOR_KEY not in rt.state.values
            state = dict(rt.state.values)
        again = WechatChannel(make_config(fake))
        async with wechat_runtime(again, tmp_path, state) as rt2:
            [message] = await rt2.wait_for_messages(1)
            assert message.text == "not lost"


async def test_long_reply_is_split_under_the_limit_and_retries_keep_client_ids(
    tmp_path: Path,
) -> None:
    async with FakeWechat() as fake:
        write_credentials(tmp_path, fake)
        channel = WechatChannel(make_config(fake))
        async with wechat_runtime(channel, tmp_path) as rt:
            await fake.add_message(ALICE, "write me an essay")
            await rt.wait_for_messages(1)
            words = [f"w{i:04d}" for i in range(1200)]
            text = " ".join(words)  # 6,000 characters
            assert len(text) >= 5999
            fake.send_rets = [{"ret": 0, "message_id": "p0"}, {"ret": -2, "errmsg": "rate limited"}]
            with pytest.raises(RecipientOffline):
                await channel.send(reply(text, outbox_id=7))
            result = await channel.send(reply(text, outbox_id=7))  # the dispatcher's retry
            client_ids = [a["client_id"] for a in fake.send_attempts]
            assert client_ids[:2] == ["picobot-row7-0", "picobot-row7-1"]
            assert client_ids[2] == "picobot-row7-1"  # part 0 was not sent twice
            assert len(result.platform_message_ids) == len(client_ids) - 1
            delivered = [a["item_list"][0]["text_item"]["text"] for a in fake.send_attempts]
            del delivered[1]  # the rate-limited attempt
            assert len(delivered) >= 3
            assert " ".join(delivered).split() == words
            assert all(len(p) <= 2000 for p in delivered)


async def test_send_failures_map_to_typed_errors(tmp_path: Path) -> None:
    async with FakeWechat() as fake:
        write_credentials(tmp_path, fake)
        channel = WechatChannel(make_config(fake))
        async with wechat_runtime(channel, tmp_path) as rt:
            with pytest.raises(PermanentSendError, match="context_token"):
                await channel.send(reply("nobody wrote to us yet"))
            assert fake.send_attempts == []
            await fake.add_message(ALICE, "hi")
            await rt.wait_for_messages(1)
            fake.send_rets = [
                {"ret": -2, "errmsg": "rate limited"},
                {"ret": -14, "errmsg": "session timeout"},
                {"ret": -1, "errmsg": "system error"},
            ]
            with pytest.raises(RecipientOffline, match="context restricted"):
                await channel.send(reply("a", outbox_id=1))
            with pytest.raises(TransientSendError, match="expired"):
                await channel.send(reply("b", outbox_id=2))
            with pytest.raises(TransientSendError, match="ret=-1"):
                await channel.send(reply("c", outbox_id=3))
            assert fake.token not in json.dumps(rt.state.values)


async def test_without_credentials_start_returns_not_ready_then_picks_up_a_login(
    tmp_path: Path,
) -> None:
    async with FakeWechat() as fake:
        channel = WechatChannel(make_config(fake))
        async with wechat_runtime(channel, tmp_path) as rt:
            assert channel.not_ready_reason == NOT_LOGGED_IN_REASON
            assert rt.secrets == []
            write_credentials(tmp_path, fake)
            await fake.add_message(ALICE, "first")
            [message] = await rt.wait_for_messages(1)
            assert message.text == "first"
            assert channel.ready
            assert fake.token in rt.secrets  # the token from the login is kept out of logs


async def test_every_sender_is_submitted_and_the_cursor_moves(tmp_path: Path) -> None:
    # allow_from is the gateway's access policy now (tests/e2e/test_access_channels.py)
    async with FakeWechat() as fake:
        write_credentials(tmp_path, fake)
        channel = WechatChannel(make_config(fake, allow_from=[BOB]))
        async with wechat_runtime(channel, tmp_path) as rt:
            await fake.add_message(ALICE, "let me in")
            await fake.add_message(BOB, "hello")
            messages = await rt.wait_for_messages(2)
            assert [m.sender_id for m in messages] == [ALICE, BOB]
            await eventually(lambda: rt.state.values.get(CURSOR_KEY) == "buf-2")
            assert isinstance(rt.bus, CountingBus)
            assert [m.sender_id for m in rt.bus.submitted] == [ALICE, BOB]


async def test_bot_generating_and_group_messages_are_skipped(tmp_path: Path) -> None:
    async with FakeWechat() as fake:
        write_credentials(tmp_path, fake)
        channel = WechatChannel(make_config(fake))
        async with wechat_runtime(channel, tmp_path) as rt:
            await fake.add_message(ALICE, "bot echo", message_type=2)
            await fake.add_message(ALICE, "half typed", message_state=1)
            await fake.add_message(ALICE, "in a group", group_id="g1@chatroom")
            await fake.add_message(ALICE, "new state", message_state=0)
            await fake.add_message(ALICE, "real")
            messages = await rt.wait_for_messages(2)
            assert [m.text for m in messages] == ["new state", "real"]


async def test_typing_repeats_while_working_and_cancels_when_idle(tmp_path: Path) -> None:
    async with FakeWechat() as fake:
        write_credentials(tmp_path, fake)
        channel = WechatChannel(make_config(fake))
        async with wechat_runtime(channel, tmp_path) as rt:
            await fake.add_message(ALICE, "think hard")
            await rt.wait_for_messages(1)

            def event(kind: EventKind) -> ChannelEvent:
                return ChannelEvent(kind, "wechat", ALICE, "wechat:" + ALICE, "run-1")

            await channel.notify(event(EventKind.WORKING))
            await fake.wait_for(lambda: len(fake.typing) >= 3)
            await channel.notify(event(EventKind.IDLE))
            assert fake.typing[-1] == (ALICE, 2)
            assert all(t == (ALICE, 1) for t in fake.typing[:-1])
            assert len(fake.tickets_issued) == 1
            assert fake.protocol_errors == []


async def test_getupdates_errors_retry_then_back_off(tmp_path: Path) -> None:
    async with FakeWechat() as fake:
        write_credentials(tmp_path, fake)
        channel = WechatChannel(make_config(fake))
        async with wechat_runtime(channel, tmp_path) as rt:
            for _ in range(3):
                await fake.script_updates({"ret": -1, "errmsg": "busy"})
            await eventually(
                lambda: (channel.not_ready_reason or "").startswith("WeChat getupdates")
            )
            await fake.add_message(ALICE, "recovered")
            [message] = await rt.wait_for_messages(1)
            assert message.text == "recovered"
            await eventually(lambda: channel.ready)


async def test_credentials_that_cannot_be_marked_expired_are_a_warning_not_a_poller_failure(
    tmp_path: Path,
) -> None:
    async with FakeWechat() as fake:
        cred_path = write_credentials(tmp_path, fake)
        # save_credentials writes a temp file beside the real one, then renames
        # it; a directory in the temp file's place makes that write fail.
        blocker = cred_path.with_name(f".{cred_path.name}.{os.getpid()}.tmp")
        blocker.mkdir()
        channel = WechatChannel(make_config(fake, session_pause_secs=60))
        async with wechat_runtime(channel, tmp_path) as rt:
            with structlog.testing.capture_logs() as logs:
                await fake.script_updates({"ret": -14, "errcode": -14, "errmsg": "session timeout"})
                await eventually(lambda: channel.not_ready_reason == EXPIRED_REASON)
            events = [e["event"] for e in logs]
            assert "wechat credentials not marked expired" in events
            assert "wechat poller failed" not in events  # no crash and restart
            saved = load_credentials(cred_path)
            assert saved is not None
            assert not saved.expired

            blocker.rmdir()
            fake.token = "ilinkbot_new"
            write_credentials(tmp_path, fake)
            await fake.add_message(ALICE, "after")
            [message] = await rt.wait_for_messages(1)
            assert message.text == "after"
            await eventually(lambda: channel.ready)


async def test_a_long_poll_that_outlives_the_client_timeout_is_an_empty_success(
    tmp_path: Path,
) -> None:
    async with FakeWechat() as fake:
        write_credentials(tmp_path, fake)
        fake.stall_updates = 1
        channel = WechatChannel(make_config(fake, poll_timeout_secs=0.1))
        async with wechat_runtime(channel, tmp_path) as rt:
            await fake.add_message(ALICE, "after the stall")
            [message] = await rt.wait_for_messages(1)
            assert message.text == "after the stall"
            assert fake.updates_requests[:2] == ["", ""]  # same cursor, no error
            assert channel.ready


async def test_context_token_survives_a_restart_and_a_replay_never_downgrades_it(
    tmp_path: Path,
) -> None:
    async with FakeWechat() as fake:
        write_credentials(tmp_path, fake)
        first = WechatChannel(make_config(fake))
        async with wechat_runtime(first, tmp_path) as rt1:
            old = await fake.add_message(ALICE, "m1")
            await fake.add_message(ALICE, "m2")
            await rt1.wait_for_messages(2)
        second = WechatChannel(make_config(fake))
        async with wechat_runtime(second, tmp_path, dict(rt1.state.values)) as rt2:
            await second.send(reply("from the stored token"))
            assert fake.sent[-1].context_token == fake.latest_tokens[ALICE]
            await fake.replay(old)  # the replay carries m1's older token
            await rt2.wait_for_messages(1)
            await second.send(reply("still the newest token", outbox_id=2))
            assert fake.sent[-1].context_token == fake.latest_tokens[ALICE]
            assert fake.discarded == []


async def test_malformed_messages_are_skipped_and_polling_goes_on(tmp_path: Path) -> None:
    async with FakeWechat() as fake:
        write_credentials(tmp_path, fake)
        channel = WechatChannel(make_config(fake))
        async with wechat_runtime(channel, tmp_path) as rt:
            await fake.add_message(ALICE, items=[{"type": 1, "text_item": "not an object"}])
            await fake.add_message(ALICE, items=[{"type": 2, "image_item": "nor this"}])
            await fake.add_message(ALICE, "fine")
            messages = await rt.wait_for_messages(2)
            assert [m.text for m in messages] == ["[image could not be downloaded]", "fine"]
            await eventually(lambda: rt.state.values.get(CURSOR_KEY) == "buf-3")
            assert channel.ready


async def test_a_send_that_times_out_is_retried_not_failed(tmp_path: Path) -> None:
    """A slow sendmessage is transient: the row is retried with its client_id
    (TimeoutError is an OSError: it must not read as "the file is gone")."""
    async with FakeWechat() as fake:
        write_credentials(tmp_path, fake)
        channel = WechatChannel(make_config(fake, request_timeout_secs=0.2))
        async with wechat_runtime(channel, tmp_path) as rt:
            await fake.add_message(ALICE, "hi")
            await rt.wait_for_messages(1)
            fake.send_delay_secs = 1.0
            with pytest.raises(TransientSendError):
                await channel.send(reply("slow", outbox_id=1))
