"""Telegram adapter, inbound side: the real PTB Bot against the fake Bot API."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from structlog.testing import capture_logs

from channels.telegram import TelegramChannel, TelegramConfig
from gateway.bus import ChatType, MediaKind, Receipt, reply_handle
from tests.channel_runtime import TestRuntime, channel_runtime
from tests.fakes.telegram_server import BOT_ID, BOT_USERNAME, FakeTelegram


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


def make_channel(tg: FakeTelegram, **overrides: Any) -> TelegramChannel:
    return TelegramChannel(TelegramConfig(**tg.settings(**overrides)))


def mention(text: str, handle: str) -> list[dict[str, Any]]:
    return [{"type": "mention", "offset": text.index(handle), "length": len(handle)}]


@asynccontextmanager
async def seeded_runtime(
    channel: TelegramChannel, media_dir: Path, state: dict[str, str], *, consume: bool = True
) -> AsyncIterator[TestRuntime]:
    """Like channel_runtime, but with pre-seeded state and an optional paused consumer."""
    rt = TestRuntime(media_dir)
    rt.state.values.update(state)
    channel.setup(rt)
    consumer = asyncio.create_task(rt._consume()) if consume else None
    try:
        await channel.start()
        yield rt
    finally:
        await channel.stop()
        if consumer is not None:
            consumer.cancel()
            with pytest.raises(asyncio.CancelledError):
                await consumer


async def test_text_update_is_recorded(tg: FakeTelegram, tmp_path: Path) -> None:
    channel = make_channel(tg)
    async with channel_runtime(channel, tmp_path) as rt:
        assert channel.ready
        update = await tg.add_message("hello bot", chat_id=42, user_id=42)
        [msg] = await rt.wait_for_messages(1)
    assert msg.channel == "telegram"
    assert (msg.chat_id, msg.sender_id, msg.text) == ("42", "42", "hello bot")
    assert msg.chat_type is ChatType.DIRECT
    assert msg.message_id == f"42:{update['message']['message_id']}"
    assert msg.metadata["username"] == "alice"
    assert [c.method for c in tg.calls[:2]] == ["getMe", "deleteWebhook"]


async def test_photo_arrives_as_downloaded_image(tg: FakeTelegram, tmp_path: Path) -> None:
    small = tg.add_file(b"small-jpeg", "photos/file_0.jpg")
    large_bytes = b"\xff\xd8large-jpeg-bytes"
    large = tg.add_file(large_bytes, "photos/file_1.jpg")
    photo = [
        {"file_id": small, "file_unique_id": "s1", "width": 90, "height": 60, "file_size": 10},
        {"file_id": large, "file_unique_id": "l1", "width": 1280, "height": 960, "file_size": 20},
    ]
    channel = make_channel(tg)
    async with channel_runtime(channel, tmp_path) as rt:
        await tg.add_message(None, photo=photo, caption="what is this?")
        [msg] = await rt.wait_for_messages(1)
    assert msg.text == "what is this?"
    [ref] = msg.media
    assert ref.kind is MediaKind.IMAGE
    assert ref.mime_type == "image/jpeg"
    path = Path(ref.path)
    assert path.parent == tmp_path / "telegram"
    assert path.read_bytes() == large_bytes
    assert tg.downloads == ["photos/file_1.jpg"]


async def test_document_and_voice_become_file_and_audio(tg: FakeTelegram, tmp_path: Path) -> None:
    doc = tg.add_file(b"%PDF-1.4 ...", "documents/file_2.pdf")
    voice = tg.add_file(b"OggS voice", "voice/file_3.oga")
    channel = make_channel(tg)
    async with channel_runtime(channel, tmp_path) as rt:
        await tg.add_message(
            None,
            document={
                "file_id": doc,
                "file_unique_id": "d1",
                "file_name": "report.pdf",
                "mime_type": "application/pdf",
                "file_size": 12,
            },
        )
        await tg.add_message(
            None,
            voice={
                "file_id": voice,
                "file_unique_id": "v1",
                "duration": 2,
                "mime_type": "audio/ogg",
            },
        )
        first, second = await rt.wait_for_messages(2)
    [pdf] = first.media
    assert (pdf.kind, pdf.name, pdf.mime_type) == (MediaKind.FILE, "report.pdf", "application/pdf")
    assert pdf.path.endswith(".pdf")
    assert Path(pdf.path).read_bytes() == b"%PDF-1.4 ..."
    [ogg] = second.media
    assert ogg.kind is MediaKind.AUDIO
    assert Path(ogg.path).read_bytes() == b"OggS voice"


async def test_oversized_media_is_left_out_with_a_note(tg: FakeTelegram, tmp_path: Path) -> None:
    big = tg.add_file(b"x" * 100, "documents/big.bin")
    channel = make_channel(tg, max_media_bytes=50)
    async with channel_runtime(channel, tmp_path) as rt:
        # No file_size in the message: the cap must hold on getFile's answer too.
        await tg.add_message(
            "see attached",
            document={"file_id": big, "file_unique_id": "b1", "file_name": "big.bin"},
        )
        [msg] = await rt.wait_for_messages(1)
    assert msg.media == ()
    assert msg.text.startswith("see attached\n[file omitted: larger than 50 bytes]")
    assert tg.downloads == []


async def test_a_file_streaming_more_than_getfile_declared_stops_at_the_cap(
    tg: FakeTelegram, tmp_path: Path
) -> None:
    # getFile says 1 KB; the download streams 50 MB. The read stops past the
    # 64 KB cap: the server got to send a few socket buffers, not 50 MB.
    file_id, liar = tg.add_streamed_file(declared=1024, total=50_000_000)
    channel = make_channel(tg, max_media_bytes=65536)
    async with channel_runtime(channel, tmp_path) as rt:
        await tg.add_message(
            "see attached",
            document={"file_id": file_id, "file_unique_id": "z1", "file_name": "liar.bin"},
        )
        [msg] = await rt.wait_for_messages(1)
        await asyncio.wait_for(liar.done.wait(), 10)
    assert msg.media == ()
    assert msg.text == "see attached\n[file omitted: larger than 65536 bytes]"
    assert tg.downloads == ["documents/liar.bin"]
    assert liar.sent < 10_000_000, liar.sent
    assert list((tmp_path / "telegram").glob("*")) == []


async def test_a_download_that_drips_is_given_up_at_its_deadline_and_the_channel_goes_on(
    tg: FakeTelegram, tmp_path: Path
) -> None:
    # 640 KB, within the cap, sent 64 KB a second: ten seconds for the whole,
    # while the update loop waits. Past download_timeout_secs the file is left
    # out with a note, and the next update is read.
    file_id, drip = tg.add_streamed_file(declared=655_360, total=655_360, pause_secs=1.0)
    channel = make_channel(tg, download_timeout_secs=0.5)
    async with channel_runtime(channel, tmp_path) as rt:
        await tg.add_message(
            "slow one",
            document={"file_id": file_id, "file_unique_id": "d1", "file_name": "liar.bin"},
        )
        await tg.add_message("next")
        first, second = await rt.wait_for_messages(2)
        await asyncio.wait_for(drip.done.wait(), 10)
    assert first.media == ()
    assert first.text == "slow one\n[file could not be downloaded]"
    assert second.text == "next"
    assert drip.sent < drip.total, drip.sent
    assert list((tmp_path / "telegram").glob("*")) == []


async def test_offset_is_persisted_and_a_restart_sees_each_update_once(
    tg: FakeTelegram, tmp_path: Path
) -> None:
    first_batch = [await tg.add_message(f"m{i}") for i in range(3)]
    channel = make_channel(tg)
    async with seeded_runtime(channel, tmp_path, {}) as rt:
        received = await rt.wait_for_messages(3)
        await tg.wait_for(
            lambda: rt.state.values.get("offset") == str(first_batch[-1]["update_id"] + 1)
        )
        state = dict(rt.state.values)
    assert [m.text for m in received] == ["m0", "m1", "m2"]
    # stop() confirmed the recorded updates to Telegram.
    assert tg.confirmed == [u["update_id"] for u in first_batch]
    assert tg.pending == []

    second_batch = [await tg.add_message(f"n{i}") for i in range(2)]
    polls_before = len(tg.calls_of("getUpdates"))
    restarted = make_channel(tg)
    async with seeded_runtime(restarted, tmp_path, state) as rt2:
        received2 = await rt2.wait_for_messages(2)
        await tg.wait_for(
            lambda: rt2.state.values["offset"] == str(second_batch[-1]["update_id"] + 1)
        )
    assert [m.text for m in received2] == ["n0", "n1"]
    # The restarted channel resumed from the persisted offset, not from 0.
    first_poll_after_restart = tg.calls_of("getUpdates")[polls_before]
    assert first_poll_after_restart.params["offset"] == str(first_batch[-1]["update_id"] + 1)


async def test_offset_does_not_move_before_the_update_is_recorded(
    tg: FakeTelegram, tmp_path: Path
) -> None:
    update = await tg.add_message("wait for me")
    channel = make_channel(tg)
    async with seeded_runtime(channel, tmp_path, {}, consume=False) as rt:
        # The channel has submitted the message, but the gateway has not recorded it.
        submitted = await asyncio.wait_for(rt.bus.get(), 5)
        assert submitted.text == "wait for me"
        assert "offset" not in rt.state.values
        assert [u["update_id"] for u in tg.pending] == [update["update_id"]]
        assert all(
            int(c.params.get("offset") or 0) <= update["update_id"]
            for c in tg.calls_of("getUpdates")
        )
        assert submitted.receipt is not None
        submitted.receipt.set_result(Receipt.ACCEPTED)
        await tg.wait_for(lambda: tg.pending == [])
        assert rt.state.values["offset"] == str(update["update_id"] + 1)


async def test_webhook_checks_the_secret_token(tg: FakeTelegram, tmp_path: Path) -> None:
    channel = make_channel(
        tg,
        mode="webhook",
        webhook_url="https://bot.example.test/webhooks/telegram",
        secret_token="s3cret-Token_1",
    )
    async with channel_runtime(channel, tmp_path) as rt, aiohttp.ClientSession() as http:
        assert tg.webhook["url"] == "https://bot.example.test/webhooks/telegram"
        assert tg.webhook["secret_token"] == "s3cret-Token_1"
        url = f"{rt.base_url}/webhooks/telegram"
        update = {"update_id": 5, "message": tg.message("via webhook")}
        for headers in ({}, {"X-Telegram-Bot-Api-Secret-Token": "wrong"}):
            async with http.post(url, json=update, headers=headers) as resp:
                assert resp.status == 403
        assert rt.received == []
        assert rt.bus.depth == 0
        good = {"X-Telegram-Bot-Api-Secret-Token": "s3cret-Token_1"}
        # authenticated but unreadable: kept as a dead letter and answered 200, so
        # Telegram does not redeliver it (and hold back the updates behind it)
        async with http.post(url, data=b"{not json", headers=good) as resp:
            assert resp.status == 200
        for malformed in ([], {"update_id": 6, "message": "not a message"}):
            async with http.post(url, json=malformed, headers=good) as resp:
                assert resp.status == 200
        assert [(d[0], d[2]) for d in rt.dead_letters] == [
            (None, "malformed update: JSONDecodeError"),
            (None, "malformed update: TypeError"),
            ("6", "malformed update: AttributeError"),
        ]
        async with http.post(url, json=update, headers=good) as resp:
            assert resp.status == 200
        # 200 came after the record: the message is already there, no waiting needed.
        assert [m.text for m in rt.received] == ["via webhook"]
    assert tg.calls_of("getUpdates") == []


async def test_group_messages_say_whether_they_address_the_bot(
    tg: FakeTelegram, tmp_path: Path
) -> None:
    # Whether to answer is the gateway's access policy (groups.require_mention).
    group = {"chat_id": -100123, "chat_type": "supergroup"}
    handle = f"@{BOT_USERNAME}"
    bot_message = {"message_id": 7, "date": 1, "chat": {"id": -100123, "type": "supergroup"}}
    bot_message["from"] = {"id": BOT_ID, "is_bot": True, "first_name": "Pico"}
    bot_message["text"] = "earlier answer"
    channel = make_channel(tg)
    async with channel_runtime(channel, tmp_path) as rt:
        await tg.add_message("hello everyone", **group)
        await tg.add_message("/start@other_bot", entities=[_command("/start@other_bot")], **group)
        text = f"{handle} what time is it?"
        await tg.add_message(text, entities=mention(text, handle), **group)
        await tg.add_message("and tomorrow?", reply_to_message=bot_message, **group)
        command = f"/new@{BOT_USERNAME}"
        await tg.add_message(command, entities=[_command(command)], **group)
        await tg.add_message("/help", entities=[_command("/help")], **group)
        received = await rt.wait_for_messages(6)
    assert [(m.text, m.addressed) for m in received] == [
        ("hello everyone", False),
        ("/start@other_bot", False),
        ("what time is it?", True),
        ("and tomorrow?", True),
        ("/new", True),
        ("/help", True),  # a command without @name is for every bot in the group
    ]
    assert all(m.chat_type is ChatType.GROUP and m.chat_id == "-100123" for m in received)
    assert received[2].mentions == (handle,)
    assert received[3].reply_to == "earlier answer"


async def test_every_sender_is_recorded_with_their_username(
    tg: FakeTelegram, tmp_path: Path
) -> None:
    # allow_from is the gateway's access policy now: the adapter records everyone
    channel = make_channel(tg, allow_from=["@Bob", "7"])
    async with channel_runtime(channel, tmp_path) as rt:
        await tg.add_message("let me in", user_id=42, chat_id=42, username="Alice")
        await tg.add_message("by id", user_id=7, chat_id=7, username=None)
        received = await rt.wait_for_messages(2)
    assert [(m.sender_id, m.sender_aliases, m.addressed) for m in received] == [
        ("42", ("@alice",), True),  # usernames are case-insensitive: kept lower-case
        ("7", (), True),
    ]


async def test_the_senders_language_code_is_the_messages_language(
    tg: FakeTelegram, tmp_path: Path
) -> None:
    channel = make_channel(tg)
    async with channel_runtime(channel, tmp_path) as rt:
        await tg.add_message("你好", user_id=42, chat_id=42, language_code="zh-hans")
        await tg.add_message("hi", user_id=7, chat_id=7)
        received = await rt.wait_for_messages(2)
    assert [m.language for m in received] == ["zh-hans", None]


async def test_bad_token_is_reported_not_ready_and_never_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with FakeTelegram(token="999:the-real-token") as fake:
        config = TelegramConfig(**fake.settings(token="111:WRONG-token-value"))
        channel = TelegramChannel(config)
        caplog.set_level("DEBUG")
        with capture_logs() as logs:
            async with channel_runtime(channel, tmp_path):
                assert not channel.ready
                assert channel.not_ready_reason is not None
                assert "rejected the bot token" in channel.not_ready_reason
    assert "WRONG-token-value" not in caplog.text
    assert "WRONG-token-value" not in repr(logs)
    assert "WRONG-token-value" not in repr(config)


def _command(text: str) -> dict[str, Any]:
    return {"type": "bot_command", "offset": 0, "length": len(text)}


@pytest.mark.parametrize("enabled", [False, True])
async def test_edited_messages_are_ignored_unless_enabled(tmp_path: Path, enabled: bool) -> None:
    async with FakeTelegram() as tg:
        original = tg.message("first wording", message_id=70)
        edited = {**original, "text": "second wording", "edit_date": original["date"] + 30}
        channel = make_channel(tg, edited_messages=enabled)
        async with channel_runtime(channel, tmp_path) as rt:
            await tg.add_update({"edited_message": edited})
            await tg.add_message("a marker after it")
            messages = await rt.wait_for_messages(2 if enabled else 1)
        assert all(
            "edited_message" in c.params["allowed_updates"] for c in tg.calls_of("getUpdates")
        )
    texts = [m.text for m in messages]
    if enabled:
        assert texts == ["[edited] second wording", "a marker after it"]
        assert messages[0].message_id == f"42:70:edit:{edited['edit_date']}"
        assert reply_handle(messages[0]) == "42:70"  # the reply quotes the edited message
    else:
        assert texts == ["a marker after it"]
