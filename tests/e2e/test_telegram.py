"""Telegram end to end: fake Bot API → real gateway (storage, agent, outbox) → fake LLM."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from storage.sqlite.db import Database
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.support import make_config, newest, running_gateway


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


def telegram_config(home: Path, llm: FakeOpenAI, tg: FakeTelegram, **overrides: Any) -> Any:
    return make_config(
        home,
        llm.base_url,
        channels={"websocket": {"enabled": False}, "telegram": tg.settings(**overrides)},
        gateway={"outbound_retry_base_secs": 0.05},
    )


async def wait_for_reply(tg: FakeTelegram, count: int = 1) -> list[str]:
    await tg.wait_for(lambda: len(tg.sent_texts) >= count, timeout=10)
    return tg.sent_texts


async def test_a_text_message_is_answered_in_the_chat(
    home: Path, llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    loaded = telegram_config(home, llm, tg)
    async with running_gateway(loaded) as gw:
        assert gw.readiness() == []
        llm.hold()
        await tg.add_message("hello there", chat_id=42, user_id=42)
        # "typing…" is shown while the turn runs.
        [typing] = await tg.wait_for_calls("sendChatAction", 1, timeout=10)
        assert (typing.params["chat_id"], typing.params["action"]) == ("42", "typing")
        llm.release()
        assert await wait_for_reply(tg) == ["echo: hello there"]
    [request] = llm.requests
    assert newest(request)["content"] == "hello there"
    async with Database(loaded.storage_path) as db:
        rows = await db.read(
            lambda c: c.execute(
                "SELECT role, content FROM messages WHERE role != 'system' ORDER BY seq"
            ).fetchall()
        )
    assert [(r["role"], r["content"]) for r in rows] == [
        ("user", "hello there"),
        ("assistant", "echo: hello there"),
    ]


async def test_a_photo_reaches_the_llm_as_an_image(
    home: Path, llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    jpeg = b"\xff\xd8\xff\xe0fake-jpeg-payload"
    file_id = tg.add_file(jpeg, "photos/file_7.jpg")
    photo = [{"file_id": file_id, "file_unique_id": "p7", "width": 640, "height": 480}]
    llm.add_text("A nice picture.")
    async with running_gateway(telegram_config(home, llm, tg)):
        await tg.add_message(None, photo=photo, caption="what do you see?")
        assert await wait_for_reply(tg) == ["A nice picture."]
    content = newest(llm.requests[0])["content"]
    texts = [p["text"] for p in content if p["type"] == "text"]
    images = [p["image_url"]["url"] for p in content if p["type"] == "image_url"]
    assert texts == ["what do you see?"]
    assert images == [f"data:image/jpeg;base64,{base64.b64encode(jpeg).decode()}"]


async def test_429_is_honoured_and_the_reply_delivered_once(
    home: Path, llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    tg.fail_next(
        "sendMessage", 429, "Too Many Requests: retry after 1", parameters={"retry_after": 1}
    )
    async with running_gateway(telegram_config(home, llm, tg)):
        await tg.add_message("ping")
        assert await wait_for_reply(tg) == ["echo: ping"]
    refused, delivered = tg.calls_of("sendMessage")
    assert refused.params["text"] == delivered.params["text"] == "echo: ping"
    assert "_ok" not in refused.params
    # The dispatcher waited for Telegram's retry_after before trying again.
    assert delivered.at - refused.at >= 0.9
    assert tg.sent_texts == ["echo: ping"]


async def test_a_restart_resumes_without_loss_or_duplicates(
    home: Path, llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    loaded = telegram_config(home, llm, tg)
    async with running_gateway(loaded):
        first = await tg.add_message("first")
        await wait_for_reply(tg, 1)
    # Arrives while the gateway is down; Telegram keeps it.
    await tg.add_message("second")
    polls_before = len(tg.calls_of("getUpdates"))
    async with running_gateway(loaded):
        await wait_for_reply(tg, 2)
    # The restarted gateway resumed from the offset it had persisted in its database.
    assert tg.calls_of("getUpdates")[polls_before].params["offset"] == str(first["update_id"] + 1)
    assert tg.sent_texts == ["echo: first", "echo: second"]
    assert [newest(r)["content"] for r in llm.requests] == ["first", "second"]
    assert tg.pending == []


async def test_webhook_mode_answers_only_a_caller_with_the_secret(
    home: Path, llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    loaded = telegram_config(
        home,
        llm,
        tg,
        mode="webhook",
        webhook_url="https://bot.example.test/webhooks/telegram",
        secret_token="e2e-secret",
    )
    update = {"update_id": 1, "message": tg.message("via webhook")}
    async with running_gateway(loaded) as gw, aiohttp.ClientSession() as http:
        url = f"{gw.base_url}/webhooks/telegram"
        bad = {"X-Telegram-Bot-Api-Secret-Token": "guess"}
        async with http.post(url, json=update, headers=bad) as resp:
            assert resp.status == 403
        good = {"X-Telegram-Bot-Api-Secret-Token": "e2e-secret"}
        async with http.post(url, json=update, headers=good) as resp:
            assert resp.status == 200
        # Telegram redelivers the same update: recorded once, answered once.
        async with http.post(url, json=update, headers=good) as resp:
            assert resp.status == 200
        assert await wait_for_reply(tg) == ["echo: via webhook"]
    assert len(llm.requests) == 1
    assert tg.sent_texts == ["echo: via webhook"]


async def test_streaming_shows_one_message_that_ends_as_the_full_reply(
    home: Path, llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    llm.add_text("**Streamed** answer in several words")
    async with running_gateway(telegram_config(home, llm, tg, streaming=True)):
        await tg.add_message("stream please")
        await tg.wait_for(lambda: any(c.params.get("parse_mode") == "HTML" for c in tg.calls))
    assert llm.requests[0]["stream"] is True
    # One message in the chat: streamed (plain) and then replaced, or sent once at the end.
    assert len(tg.sent_texts) == 1
    final = [c for c in tg.calls if c.params.get("parse_mode") == "HTML"][-1]
    assert final.params["_visible"] == "Streamed answer in several words"
    if final.method == "editMessageText":
        assert final.params["message_id"] == tg.calls_of("sendMessage")[0].params["_message_id"]


async def test_a_forum_topic_gets_its_reply_every_part_and_typing_in_that_topic(
    home: Path, llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    loaded = telegram_config(home, llm, tg, groups={"require_mention": False})
    question = " ".join(f"word{i:04d}" for i in range(1000))  # the echo is ~9,000 chars
    async with running_gateway(loaded):
        llm.hold()
        await tg.add_update(
            {"message": tg.topic_message(question, chat_id=-100777, thread_id=42, user_id=7)}
        )
        [typing] = await tg.wait_for_calls("sendChatAction", 1, timeout=10)
        llm.release()
        await wait_for_reply(tg, 3)
    sends = tg.calls_of("sendMessage")
    assert len(sends) == 3  # three parts, none refused
    assert all(c.params.get("_ok") for c in sends)
    assert [c.params.get("message_thread_id") for c in sends] == ["42", "42", "42"]
    assert typing.params.get("_ok")
    assert all(c.params.get("message_thread_id") == "42" for c in tg.calls_of("sendChatAction"))
    assert " ".join(tg.sent_texts).split() == f"echo: {question}".split()


async def test_a_reply_outside_topics_names_no_thread(
    home: Path, llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    loaded = telegram_config(home, llm, tg, groups={"require_mention": False})
    async with running_gateway(loaded):
        await tg.add_message("plain group", chat_id=-100778, chat_type="supergroup", user_id=7)
        assert await wait_for_reply(tg) == ["echo: plain group"]
    assert all("message_thread_id" not in c.params for c in tg.calls)
