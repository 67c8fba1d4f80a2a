"""Telegram, files out: what sendPhoto refuses goes as a document, decided from
the media limits (channels/telegram/limits.py) before the send and again on
Telegram's refusal; a file over every limit becomes a note in the chat."""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from telegram import Bot
from telegram.error import BadRequest

from channels.base import PermanentSendError
from channels.telegram import TelegramChannel, TelegramConfig
from channels.telegram.limits import LIMITS, SendAs, image_size, plan, preview
from gateway.bus import MediaKind, MediaRef, OutboundMessage
from tests.channel_runtime import channel_runtime
from tests.e2e.test_telegram import telegram_config
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram, picture_size
from tests.support import running_gateway


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png(width: int, height: int, *, pad: int = 0) -> bytes:
    """A real, decodable grey PNG; `pad` bytes of tEXt make it as large as needed."""
    rows = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    body = _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
    body += _chunk(b"IDAT", zlib.compress(rows))
    if pad:
        body += _chunk(b"tEXt", b"pad\x00" + b"x" * pad)
    return b"\x89PNG\r\n\x1a\n" + body + _chunk(b"IEND", b"")


def jpeg_header(width: int, height: int) -> bytes:
    """SOI, an APP0 (JFIF) segment, then a baseline SOF0 with the frame size."""
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    sof0 = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + app0 + sof0 + b"\xff\xda" + b"\x00" * 64 + b"\xff\xd9"


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


def make_channel(tg: FakeTelegram) -> TelegramChannel:
    return TelegramChannel(TelegramConfig(**tg.settings()))


def with_file(path: Path, kind: MediaKind, text: str = "") -> OutboundMessage:
    ref = MediaRef(kind, str(path), "image/png" if kind is MediaKind.IMAGE else None, path.name)
    return OutboundMessage("telegram", "42", text, outbox_id=1, media=(ref,))


# -- the fake refuses as the Bot API does -----------------------------------------------------


async def test_the_fake_refuses_a_10x400_photo_as_the_bot_api_does(tg: FakeTelegram) -> None:
    async with Bot(tg.token, base_url=f"{tg.api_base}/bot") as bot:
        with pytest.raises(BadRequest, match=r"(?i)photo_invalid_dimensions"):
            await bot.send_photo(42, png(10, 400), filename="strip.png")
        sent = await bot.send_photo(42, png(40, 30), filename="ok.png")
    assert sent.photo[-1].width == 40
    assert picture_size(jpeg_header(12_000, 10)) == (12_000, 10)


# -- the channel ------------------------------------------------------------------------------


async def test_a_10x400_png_sent_with_send_file_goes_as_a_document(
    home: Path, llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    strip = png(10, 400)
    loaded = telegram_config(home, llm, tg)
    loaded.workspace.mkdir(parents=True, exist_ok=True)
    (loaded.workspace / "strip.png").write_bytes(strip)
    llm.add_tool_call("send_file", {"path": "strip.png", "caption": "the strip"})
    llm.add_text("Sent.")
    async with running_gateway(loaded):
        await tg.add_message("send me the strip", chat_id=42, user_id=42)
        await tg.wait_for(lambda: tg.sent_texts == ["Sent."], timeout=10)
    assert tg.calls_of("sendPhoto") == []
    [document] = tg.calls_of("sendDocument")
    assert document.params.get("_ok")
    assert document.uploads["document"] == strip
    assert document.params["caption"] == "the strip"
    tool_answer = json.dumps(llm.requests[1])
    assert "as a document" in tool_answer
    assert "aspect ratio over 20" in tool_answer


async def test_a_photo_telegram_refuses_is_sent_again_as_a_document(
    tg: FakeTelegram, tmp_path: Path
) -> None:
    picture = tmp_path / "chart.png"
    picture.write_bytes(png(60, 40))  # fine by every documented limit
    tg.fail_next("sendPhoto", 400, "Bad Request: PHOTO_INVALID_DIMENSIONS")
    channel = make_channel(tg)
    async with channel_runtime(channel, tmp_path):
        result = await channel.send(with_file(picture, MediaKind.IMAGE, "a chart"))
    [refused] = tg.calls_of("sendPhoto")
    assert refused.error_code == 400
    [document] = tg.calls_of("sendDocument")
    assert document.uploads["document"] == picture.read_bytes()
    assert document.params["caption"] == "a chart"
    assert len(result.platform_message_ids) == 1


async def test_a_jpeg_wider_than_the_photo_limit_goes_as_a_document(
    tg: FakeTelegram, tmp_path: Path
) -> None:
    wide = tmp_path / "panorama.jpg"
    wide.write_bytes(jpeg_header(12_000, 800))
    channel = make_channel(tg)
    async with channel_runtime(channel, tmp_path):
        await channel.send(with_file(wide, MediaKind.IMAGE))
    assert tg.calls_of("sendPhoto") == []
    [document] = tg.calls_of("sendDocument")
    assert document.params.get("_ok")


async def test_a_photo_within_the_limits_still_goes_as_a_photo(
    tg: FakeTelegram, tmp_path: Path
) -> None:
    picture = tmp_path / "square.png"
    picture.write_bytes(png(64, 64))
    channel = make_channel(tg)
    async with channel_runtime(channel, tmp_path):
        await channel.send(with_file(picture, MediaKind.IMAGE))
    [photo] = tg.calls_of("sendPhoto")
    assert photo.params.get("_ok")
    assert tg.calls_of("sendDocument") == []


async def test_a_file_over_every_limit_becomes_a_note_in_the_chat(
    tg: FakeTelegram, tmp_path: Path
) -> None:
    huge = tmp_path / "backup.tar"
    with huge.open("wb") as file:
        file.truncate(LIMITS.upload_bytes + 1)
    channel = make_channel(tg)
    async with channel_runtime(channel, tmp_path):
        result = await channel.send(with_file(huge, MediaKind.FILE, "the backup"))
    assert tg.calls_of("sendDocument") == []
    [note] = tg.sent_texts
    assert note.startswith("[backup.tar (50.0 MB) was not sent: Telegram takes files of at most")
    assert note.endswith("the backup")  # the caption it would have had
    assert len(result.platform_message_ids) == 1


# -- the table and the header reader ----------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "size", "dims", "expected"),
    [
        (MediaKind.IMAGE, 1_000, (640, 480), SendAs.PHOTO),
        (MediaKind.IMAGE, 1_000, None, SendAs.PHOTO),  # unknown: try, fall back on refusal
        (MediaKind.IMAGE, 1_000, (10, 400), SendAs.DOCUMENT),  # ratio 40
        (MediaKind.IMAGE, 1_000, (6_000, 4_001), SendAs.DOCUMENT),  # sum over 10000
        (MediaKind.IMAGE, LIMITS.photo_bytes + 1, (640, 480), SendAs.DOCUMENT),
        (MediaKind.FILE, 1_000, None, SendAs.DOCUMENT),
        (MediaKind.FILE, LIMITS.upload_bytes + 1, None, SendAs.NOTHING),
        (MediaKind.IMAGE, LIMITS.upload_bytes + 1, (640, 480), SendAs.NOTHING),
    ],
)
def test_the_limits_table_decides_how_a_file_goes(
    kind: MediaKind, size: int, dims: tuple[int, int] | None, expected: SendAs
) -> None:
    assert plan(kind, size, dims) is expected


def test_image_size_reads_png_and_jpeg_headers_and_nothing_else() -> None:
    assert image_size(png(10, 400)) == (10, 400)
    assert image_size(jpeg_header(12_000, 800)) == (12_000, 800)
    broken = bytearray(png(10, 400))
    broken[20] ^= 0xFF  # height byte: the IHDR CRC no longer matches
    assert image_size(bytes(broken)) is None
    assert image_size(b"GIF89a....") is None
    assert image_size(b"\xff\xd8\xff") is None


def test_the_tool_answer_says_how_the_file_will_go() -> None:
    assert preview(MediaKind.IMAGE, 1_000, (640, 480)) == "as a photo"
    assert "as a document" in preview(MediaKind.IMAGE, 1_000, None)
    assert preview(MediaKind.FILE, 1_000, None) == "as a document"
    assert "aspect ratio" in preview(MediaKind.IMAGE, 1_000, (10, 400))
    with pytest.raises(PermanentSendError, match="not sent"):
        preview(MediaKind.FILE, LIMITS.upload_bytes + 1, None)
