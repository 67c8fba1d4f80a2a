"""Feishu, files out: an image over im/v1/images' 10 MB goes through im/v1/files
(30 MB) as a `file` message; a file over every limit becomes a note in the chat
(channels/feishu/limits.py). The fake refuses oversize uploads as Feishu does."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from channels.base import PermanentSendError
from channels.feishu import FeishuChannel, FeishuConfig
from channels.feishu.api import FeishuApi, FeishuApiError
from channels.feishu.limits import LIMITS, SendAs, plan, preview
from gateway.bus import MediaKind, MediaRef, OutboundMessage
from tests.channel_runtime import channel_runtime
from tests.channels.test_telegram_media import png
from tests.fakes.feishu_server import APP_ID, APP_SECRET, FakeFeishu, config_dict

ELEVEN_MB = 11 * 1024 * 1024


@pytest.fixture
async def fake() -> AsyncIterator[FakeFeishu]:
    async with FakeFeishu() as server:
        yield server


def channel_for(fake: FakeFeishu) -> FeishuChannel:
    return FeishuChannel(FeishuConfig(**config_dict(fake.base_url, mode="webhook")))


def with_file(path: Path, kind: MediaKind, key: str = "k1") -> OutboundMessage:
    ref = MediaRef(kind, str(path), "image/png" if kind is MediaKind.IMAGE else None, path.name)
    return OutboundMessage("feishu", "oc_chat1", "", idempotency_key=key, media=(ref,))


async def test_the_fake_refuses_an_image_over_10_mb_as_feishu_does(fake: FakeFeishu) -> None:
    api = FeishuApi(fake.base_url, APP_ID, SecretStr(APP_SECRET))
    await api.open()
    try:
        with pytest.raises(FeishuApiError) as caught:
            await api.upload_image(png(8, 8, pad=ELEVEN_MB), "big.png")
    finally:
        await api.close()
    assert caught.value.code == 234006
    assert fake.oversize_uploads == ["image"]


async def test_an_11_mb_png_is_delivered_through_the_files_api(
    fake: FakeFeishu, tmp_path: Path
) -> None:
    big = tmp_path / "poster.png"
    big.write_bytes(png(8, 8, pad=ELEVEN_MB))
    channel = channel_for(fake)
    async with channel_runtime(channel, tmp_path):
        await channel.send(with_file(big, MediaKind.IMAGE))
    assert fake.oversize_uploads == []
    assert fake.upload_requests == ["file"]
    [(key, (name, data))] = fake.uploads.items()
    assert (name, len(data)) == ("poster.png", big.stat().st_size)
    [sent] = fake.sent
    assert (sent.msg_type, sent.content) == ("file", {"file_key": key})


async def test_a_retry_sends_the_stored_file_upload_as_a_file_again(
    fake: FakeFeishu, tmp_path: Path
) -> None:
    big = tmp_path / "poster.png"
    big.write_bytes(png(8, 8, pad=ELEVEN_MB))
    channel = channel_for(fake)
    async with channel_runtime(channel, tmp_path):
        first = await channel.send(with_file(big, MediaKind.IMAGE, key="same"))
        again = await channel.send(with_file(big, MediaKind.IMAGE, key="same"))
    assert fake.upload_requests == ["file"]  # uploaded once
    assert first == again
    assert [s.msg_type for s in fake.sent] == ["file"]  # the retry's uuid is a duplicate


async def test_a_file_over_every_limit_becomes_a_note_in_the_chat(
    fake: FakeFeishu, tmp_path: Path
) -> None:
    huge = tmp_path / "backup.tar"
    with huge.open("wb") as file:
        file.truncate(LIMITS.file_bytes + 1)
    channel = channel_for(fake)
    async with channel_runtime(channel, tmp_path):
        result = await channel.send(with_file(huge, MediaKind.FILE))
    assert fake.upload_requests == []
    assert fake.oversize_uploads == []
    [note] = fake.sent
    assert note.msg_type == "text"
    assert note.text == "[backup.tar (30.0 MB) was not sent: Feishu takes files of at most 30.0 MB]"
    assert result.platform_message_ids == (note.message_id,)


@pytest.mark.parametrize(
    ("kind", "size", "expected"),
    [
        (MediaKind.IMAGE, LIMITS.image_bytes, SendAs.IMAGE),
        (MediaKind.IMAGE, LIMITS.image_bytes + 1, SendAs.FILE),
        (MediaKind.FILE, LIMITS.file_bytes, SendAs.FILE),
        (MediaKind.IMAGE, LIMITS.file_bytes + 1, SendAs.NOTHING),
    ],
)
def test_the_limits_table_decides_how_a_file_goes(
    kind: MediaKind, size: int, expected: SendAs
) -> None:
    assert plan(kind, size) is expected


def test_the_tool_answer_says_how_the_file_will_go() -> None:
    assert preview(MediaKind.IMAGE, 1_000) == "as an image"
    assert preview(MediaKind.IMAGE, ELEVEN_MB).startswith("as a file: Feishu takes images")
    with pytest.raises(PermanentSendError, match="not sent"):
        preview(MediaKind.FILE, LIMITS.file_bytes + 1)
