"""The fake Bot API speaks the real protocol: checked with PTB's own Bot against it."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
from collections.abc import AsyncIterator

import aiohttp
import pytest
from telegram import Bot, ReplyParameters
from telegram.error import InvalidToken, RetryAfter

from tests.fakes.telegram_server import BOT_USERNAME, FakeTelegram


@pytest.fixture(autouse=True)
def _ptb_timedelta(monkeypatch: pytest.MonkeyPatch) -> None:
    # As channels.telegram does: opt in, or PTB 22 warns inside RetryAfter's constructor.
    monkeypatch.setenv("PTB_TIMEDELTA", "true")


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


@pytest.fixture
async def bot(tg: FakeTelegram) -> AsyncIterator[Bot]:
    client = Bot(tg.token, base_url=f"{tg.api_base}/bot", base_file_url=f"{tg.api_base}/file/bot")
    async with client:
        yield client


async def test_get_me_answers_with_an_empty_body(tg: FakeTelegram, bot: Bot) -> None:
    assert bot.username == BOT_USERNAME
    [call] = tg.calls_of("getMe")
    assert call.params == {}


async def test_get_updates_holds_until_an_update_arrives(tg: FakeTelegram, bot: Bot) -> None:
    poll = asyncio.create_task(bot.get_updates(timeout=10))
    await tg.wait_for_calls("getUpdates", 1)
    assert not poll.done()
    update = await tg.add_message("wake up")
    [got] = await asyncio.wait_for(poll, 5)
    assert got.update_id == update["update_id"]
    assert got.message is not None
    assert got.message.text == "wake up"


async def test_a_held_poll_ends_empty_after_its_timeout(tg: FakeTelegram, bot: Bot) -> None:
    assert await bot.get_updates(timeout=1) == ()


async def test_an_update_is_dropped_only_when_a_later_offset_confirms_it(
    tg: FakeTelegram, bot: Bot
) -> None:
    first = await tg.add_message("one")
    second = await tg.add_message("two")
    again = [u.update_id for u in await bot.get_updates()]
    assert (
        again
        == [u.update_id for u in await bot.get_updates()]
        == [
            first["update_id"],
            second["update_id"],
        ]
    )
    assert tg.confirmed == []
    rest = await bot.get_updates(offset=first["update_id"] + 1)
    assert [u.update_id for u in rest] == [second["update_id"]]
    assert tg.confirmed == [first["update_id"]]
    limited = await bot.get_updates(offset=first["update_id"] + 1, limit=1)
    assert len(limited) == 1


async def test_form_bodies_json_encode_structured_values(tg: FakeTelegram, bot: Bot) -> None:
    await bot.send_message(42, "hi", reply_parameters=ReplyParameters(message_id=3))
    [call] = tg.calls_of("sendMessage")
    assert call.content_type == "application/x-www-form-urlencoded"
    assert call.params["chat_id"] == "42"
    assert call.json("reply_parameters") == {"message_id": 3}


async def test_multipart_uploads_are_parsed_and_downloadable(tg: FakeTelegram, bot: Bot) -> None:
    message = await bot.send_document(42, document=b"file body", filename="notes.txt", caption="c")
    [call] = tg.calls_of("sendDocument")
    assert call.content_type == "multipart/form-data"
    assert call.uploads["document"] == b"file body"
    assert message.document is not None
    assert message.document.file_name == "notes.txt"
    tg_file = await bot.get_file(message.document.file_id)
    assert bytes(await tg_file.download_as_bytearray()) == b"file body"


async def test_injected_429_carries_retry_after(tg: FakeTelegram, bot: Bot) -> None:
    tg.fail_next(
        "sendMessage", 429, "Too Many Requests: retry after 5", parameters={"retry_after": 5}
    )
    with pytest.raises(RetryAfter) as caught:
        await bot.send_message(42, "hi")
    assert caught.value.retry_after == dt.timedelta(seconds=5)
    await bot.send_message(42, "hi")
    assert tg.sent_texts == ["hi"]


async def test_a_wrong_token_is_unauthorized(tg: FakeTelegram) -> None:
    stranger = Bot("1:nope", base_url=f"{tg.api_base}/bot")
    with pytest.raises(InvalidToken):
        await stranger.initialize()
    await stranger.shutdown()


async def test_concurrent_polls_are_counted_with_their_connection_and_process() -> None:
    async with FakeTelegram(identify_clients=True) as tg:
        first = Bot(tg.token, base_url=f"{tg.api_base}/bot")
        second = Bot(tg.token, base_url=f"{tg.api_base}/bot")
        async with first, second:
            assert await first.get_updates(timeout=0) == ()  # one poll alone
            assert tg.max_concurrent_polls == 1
            polls = [asyncio.create_task(bot.get_updates(timeout=10)) for bot in (first, second)]
            await tg.wait_for(lambda: tg.polls_in_flight == 2)
            await tg.add_message("for both")
            await asyncio.wait_for(asyncio.gather(*polls), 5)
    assert tg.max_concurrent_polls == 2
    assert tg.polls_in_flight == 0
    alone, *both = tg.polls
    assert [p.call for p in tg.polls] == tg.calls_of("getUpdates")
    assert alone.peer is not None
    assert both[0].peer != both[1].peer  # two connections
    assert {p.pid for p in tg.polls} == {os.getpid()}  # this process holds them all
    assert alone.returned == []
    assert [p.returned for p in both] == [[1000], [1000]]
    assert all(p.ended is not None and p.ended >= p.started for p in tg.polls)


async def test_a_poll_ends_when_its_client_hangs_up(tg: FakeTelegram) -> None:
    async with aiohttp.ClientSession() as http:
        url = f"{tg.api_base}/bot{tg.token}/getUpdates"
        poll = asyncio.create_task(http.post(url, data={"timeout": "30"}))
        await tg.wait_for(lambda: tg.polls_in_flight == 1)
        poll.cancel()  # the client hangs up mid-poll: aiohttp closes the connection
        await asyncio.gather(poll, return_exceptions=True)
        # well before its 30 s: a killed poller's poll does not linger as one in flight
        await tg.wait_for(lambda: tg.polls_in_flight == 0, timeout=5)
    assert tg.max_concurrent_polls == 1
    assert tg.polls[0].pid is None  # not asked to identify clients


async def test_sequential_polls_never_count_as_concurrent(tg: FakeTelegram, bot: Bot) -> None:
    for _ in range(3):
        await tg.add_message("one at a time")
        [update] = await bot.get_updates(offset=tg.pending[-1]["update_id"], timeout=5)
        assert update.message is not None
    assert len(tg.polls) == 3
    assert tg.max_concurrent_polls == 1


async def test_a_poll_abandoned_just_before_the_next_one_is_not_counted_with_it(
    tg: FakeTelegram, bot: Bot
) -> None:
    async with aiohttp.ClientSession() as http:
        url = f"{tg.api_base}/bot{tg.token}/getUpdates"
        poll = asyncio.create_task(http.post(url, data={"timeout": "30"}))
        await tg.wait_for(lambda: tg.polls_in_flight == 1)
        poll.cancel()  # its connection closes: the next poll, at once, is alone
        await asyncio.gather(poll, return_exceptions=True)
        assert await bot.get_updates(timeout=0) == ()
    assert tg.max_concurrent_polls == 1
