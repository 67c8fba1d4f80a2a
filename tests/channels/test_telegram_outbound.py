"""Telegram adapter, outbound side: splitting, HTML, errors, migration, typing, streaming."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from channels.base import PermanentSendError, RateLimited, TransientSendError
from channels.telegram import TelegramChannel, TelegramConfig
from gateway.bus import ChannelEvent, EventKind, OutboundMessage
from tests.channel_runtime import channel_runtime
from tests.fakes.telegram_server import Call, FakeTelegram


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


def make_channel(tg: FakeTelegram, **overrides: Any) -> TelegramChannel:
    return TelegramChannel(TelegramConfig(**tg.settings(**overrides)))


def reply(text: str, chat_id: str = "42", **kwargs: Any) -> OutboundMessage:
    return OutboundMessage(channel="telegram", chat_id=chat_id, text=text, **kwargs)


def long_reply() -> tuple[str, list[str]]:
    """About 9,000 chars in paragraphs: exactly three Telegram messages."""
    paragraphs = [f"Paragraph {i}: " + ("lorem ipsum dolor " * 24).strip() for i in range(20)]
    text = "\n\n".join(paragraphs)
    assert 8_500 < len(text) < 9_500
    return text, paragraphs


def nth_call(n: int) -> Any:
    seen = {"count": 0}

    def when(call: Call) -> bool:
        seen["count"] += 1
        return seen["count"] == n

    return when


async def test_a_9000_char_reply_arrives_as_three_messages(
    tg: FakeTelegram, tmp_path: Path
) -> None:
    text, paragraphs = long_reply()
    channel = make_channel(tg)
    async with channel_runtime(channel, tmp_path):
        result = await channel.send(reply(text))
    sent = tg.calls_of("sendMessage")
    assert len(sent) == 3
    assert result.platform_message_ids == tuple(c.params["_message_id"] for c in sent)
    visible = [c.params["_visible"] for c in sent]
    assert all(len(v) <= 4096 for v in visible)
    # Cut on paragraph boundaries, nothing lost or reordered.
    assert "\n\n".join(visible).split("\n\n") == paragraphs


async def test_markdown_goes_out_as_telegram_html(tg: FakeTelegram, tmp_path: Path) -> None:
    channel = make_channel(tg)
    async with channel_runtime(channel, tmp_path):
        await channel.send(reply("**Done** & see `x<y`"))
    [call] = tg.calls_of("sendMessage")
    assert call.params["parse_mode"] == "HTML"
    assert call.params["text"] == "<b>Done</b> &amp; see <code>x&lt;y</code>"
    assert call.params["_visible"] == "Done & see x<y"


async def test_rejected_entities_are_resent_as_plain_text(tg: FakeTelegram, tmp_path: Path) -> None:
    tg.fail_next("sendMessage", 400, "Bad Request: can't parse entities: unexpected end tag")
    channel = make_channel(tg)
    async with channel_runtime(channel, tmp_path):
        result = await channel.send(reply("**odd** markup"))
    first, second = tg.calls_of("sendMessage")
    assert first.params["parse_mode"] == "HTML"
    assert "parse_mode" not in second.params
    assert second.params["text"] == "**odd** markup"
    assert result.platform_message_ids == (second.params["_message_id"],)


async def test_429_raises_rate_limited_with_telegrams_delay(
    tg: FakeTelegram, tmp_path: Path
) -> None:
    tg.fail_next(
        "sendMessage",
        429,
        "Too Many Requests: retry after 7",
        parameters={"retry_after": 7},
    )
    channel = make_channel(tg)
    async with channel_runtime(channel, tmp_path):
        with pytest.raises(RateLimited) as caught:
            await channel.send(reply("hi", outbox_id=1))
        assert caught.value.retry_after == 7
        await channel.send(reply("hi", outbox_id=1, attempt=2))
    assert tg.sent_texts == ["hi"]


@pytest.mark.parametrize(
    ("status", "description", "error"),
    [
        (403, "Forbidden: bot was blocked by the user", PermanentSendError),
        (403, "Forbidden: bot was kicked from the group chat", PermanentSendError),
        (400, "Bad Request: chat not found", PermanentSendError),
        (502, "Bad Gateway", TransientSendError),
        (500, "Internal Server Error", TransientSendError),
    ],
)
async def test_platform_errors_map_to_channel_errors(
    tg: FakeTelegram, tmp_path: Path, status: int, description: str, error: type[Exception]
) -> None:
    tg.fail_next("sendMessage", status, description)
    channel = make_channel(tg)
    async with channel_runtime(channel, tmp_path):
        with pytest.raises(error) as caught:
            await channel.send(reply("hi"))
    assert tg.token not in str(caught.value)


async def test_network_failure_is_transient(tmp_path: Path) -> None:
    fake = await FakeTelegram().__aenter__()
    channel = make_channel(fake)
    async with channel_runtime(channel, tmp_path):
        await fake.__aexit__(None, None, None)  # Telegram is unreachable from now on
        with pytest.raises(TransientSendError) as caught:
            await channel.send(reply("hi"))
    assert "NetworkError" in str(caught.value) or "TimedOut" in str(caught.value)
    assert fake.token not in str(caught.value)


async def test_migrated_group_is_followed_and_remembered(tg: FakeTelegram, tmp_path: Path) -> None:
    tg.fail_next(
        "sendMessage",
        400,
        "Bad Request: group chat was upgraded to a supergroup chat",
        parameters={"migrate_to_chat_id": -100999},
        when=lambda c: c.params["chat_id"] == "-5",
    )
    channel = make_channel(tg)
    async with channel_runtime(channel, tmp_path) as rt:
        await channel.send(reply("first", chat_id="-5"))
        await channel.send(reply("second", chat_id="-5"))
        assert rt.state.values["migrated:-5"] == "-100999"
    chats = [c.params["chat_id"] for c in tg.calls_of("sendMessage")]
    assert chats == ["-5", "-100999", "-100999"]
    assert tg.sent_texts == ["first", "second"]

    # A restarted channel knows the new id from its state without asking again.
    restarted = make_channel(tg)
    async with channel_runtime(restarted, tmp_path) as rt2:
        rt2.state.values.update(rt.state.values)
        await restarted.send(reply("third", chat_id="-5"))
    assert tg.calls_of("sendMessage")[-1].params["chat_id"] == "-100999"


async def test_a_retried_reply_skips_the_parts_already_delivered(
    tg: FakeTelegram, tmp_path: Path
) -> None:
    text, paragraphs = long_reply()
    tg.fail_next(
        "sendMessage",
        429,
        "Too Many Requests: retry after 1",
        parameters={"retry_after": 1},
        when=nth_call(2),
    )
    channel = make_channel(tg)
    async with channel_runtime(channel, tmp_path) as rt:
        with pytest.raises(RateLimited):
            await channel.send(reply(text, outbox_id=11))
        assert "progress:11" in rt.state.values
        result = await channel.send(reply(text, outbox_id=11, attempt=2))
    delivered = [c.params["_visible"] for c in tg.calls_of("sendMessage") if c.params.get("_ok")]
    assert len(delivered) == 3
    assert "\n\n".join(delivered).split("\n\n") == paragraphs
    assert len(result.platform_message_ids) == 3


async def test_a_send_cancelled_mid_reply_keeps_its_progress_for_the_retry(
    tg: FakeTelegram, tmp_path: Path
) -> None:
    """The dispatcher's send timeout cancels a reply after its first part went
    out: the retry sends only the rest, nothing twice."""
    text, paragraphs = long_reply()
    held, release = tg.hold("sendMessage", nth_call(2))
    channel = make_channel(tg)
    async with channel_runtime(channel, tmp_path) as rt:
        sending = asyncio.create_task(channel.send(reply(text, outbox_id=12)))
        await asyncio.wait_for(held.wait(), 5)
        sending.cancel()
        with pytest.raises(asyncio.CancelledError):
            await sending
        assert "progress:12" in rt.state.values
        await channel.send(reply(text, outbox_id=12, attempt=2))
        # (the held call, given up by the client, stays unanswered: whether the
        # platform took it is what no retry can know, without an idempotency key)
        delivered = [
            c.params["_visible"] for c in tg.calls_of("sendMessage") if c.params.get("_ok")
        ]
        release.set()
    assert "\n\n".join(delivered).split("\n\n") == paragraphs  # each part once, in order


async def test_each_part_is_recorded_before_the_next_goes_so_a_kill_repeats_none(
    tg: FakeTelegram, tmp_path: Path
) -> None:
    """While part 2 of 3 is in flight the state already holds part 1: a
    process killed then (no except, no finally) resumes at part 2."""
    text, paragraphs = long_reply()
    held, release = tg.hold("sendMessage", nth_call(2))
    channel = make_channel(tg)
    async with channel_runtime(channel, tmp_path) as rt:
        sending = asyncio.create_task(channel.send(reply(text, outbox_id=13)))
        await asyncio.wait_for(held.wait(), 5)
        at_the_kill = dict(rt.state.values)  # what a SIGKILL now would leave on disk
        release.set()
        result = await sending
        assert rt.state.values["progress:13"] == ""  # done: cleared
    [first_id, *_] = result.platform_message_ids
    assert at_the_kill["progress:13"] == f"[{first_id}]"

    restarted = make_channel(tg)
    async with channel_runtime(restarted, tmp_path / "again") as rt2:
        rt2.state.values.update(at_the_kill)
        calls_before = len(tg.calls_of("sendMessage"))
        await restarted.send(reply(text, outbox_id=13, attempt=2))
    first_send = [c.params["_visible"] for c in tg.calls_of("sendMessage")[:calls_before]]
    resent = [c.params["_visible"] for c in tg.calls_of("sendMessage")[calls_before:]]
    assert "\n\n".join(first_send).split("\n\n") == paragraphs
    assert resent == first_send[1:]  # part 1 is not sent again


async def test_group_replies_quote_the_users_message(tg: FakeTelegram, tmp_path: Path) -> None:
    channel = make_channel(tg)
    async with channel_runtime(channel, tmp_path):
        await channel.send(reply("in group", chat_id="-100123", reply_to_message_id="-100123:77"))
        await channel.send(reply("in private", chat_id="42", reply_to_message_id="42:5"))
    group_call, private_call = tg.calls_of("sendMessage")
    assert group_call.json("reply_parameters")["message_id"] == 77
    assert "reply_parameters" not in private_call.params


def event(
    kind: EventKind, text: str = "", chat_id: str = "42", run_id: str = "run-1"
) -> ChannelEvent:
    return ChannelEvent(
        kind=kind, channel="telegram", chat_id=chat_id, session_id="s", run_id=run_id, text=text
    )


async def test_typing_indicator_repeats_while_a_turn_runs(tg: FakeTelegram, tmp_path: Path) -> None:
    channel = make_channel(tg)
    channel.typing_interval_secs = 0.02
    async with channel_runtime(channel, tmp_path):
        await channel.notify(event(EventKind.WORKING))
        actions = await tg.wait_for_calls("sendChatAction", 3)
        await channel.notify(event(EventKind.IDLE))
        count = len(tg.calls_of("sendChatAction"))
        # After IDLE returns the loop is cancelled and awaited: a later call proves silence.
        await channel.send(reply("done"))
        assert len(tg.calls_of("sendChatAction")) == count
    assert {(c.params["chat_id"], c.params["action"]) for c in actions} == {("42", "typing")}


async def test_streaming_edits_one_message_then_the_final_text_replaces_it(
    tg: FakeTelegram, tmp_path: Path
) -> None:
    channel = make_channel(tg, streaming=True)
    channel.stream_interval_secs = 0.01
    async with channel_runtime(channel, tmp_path):
        assert channel.capabilities.can_stream
        await channel.notify(event(EventKind.DELTA, "Hel"))
        [first] = await tg.wait_for_calls("sendMessage", 1)
        await channel.notify(event(EventKind.DELTA, "lo wor"))
        await tg.wait_for_calls("editMessageText", 1)
        await channel.notify(event(EventKind.DELTA, "ld"))
        await tg.wait_for(
            lambda: any(c.params["text"] == "Hello world" for c in tg.calls_of("editMessageText"))
        )
        result = await channel.send(reply("**Hello world**", run_id="run-1"))
    assert first.params["text"] == "Hel"
    assert "parse_mode" not in first.params
    assert len(tg.calls_of("sendMessage")) == 1
    final = tg.calls_of("editMessageText")[-1]
    assert final.params["parse_mode"] == "HTML"
    assert final.params["text"] == "<b>Hello world</b>"
    assert final.params["message_id"] == first.params["_message_id"]
    assert result.platform_message_ids == (first.params["_message_id"],)


async def test_without_streaming_deltas_send_nothing(tg: FakeTelegram, tmp_path: Path) -> None:
    channel = make_channel(tg)
    async with channel_runtime(channel, tmp_path):
        await channel.notify(event(EventKind.DELTA, "partial"))
        await channel.send(reply("final"))
    assert tg.sent_texts == ["final"]
    assert tg.calls_of("editMessageText") == []
