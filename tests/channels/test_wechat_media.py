"""Inbound WeChat media and item kinds: CDN download + AES-128-ECB, voice (SILK
to WAV, or WeChat's own transcript), quotes."""

from __future__ import annotations

import array
import base64
import io
import itertools
import secrets
import wave
from pathlib import Path

import pytest

from channels.wechat import WechatChannel
from channels.wechat.media import MediaError, decrypt_ecb, parse_aes_key
from gateway.bus import MediaKind
from tests.channels.test_wechat_support import make_config, wechat_runtime, write_credentials
from tests.fakes.wechat_server import FakeWechat, aes_ecb_encrypt, silk_tone

ALICE = "alice@im.wechat"
PNG = b"\x89PNG\r\n\x1a\n" + secrets.token_bytes(300)


async def test_image_is_downloaded_decrypted_and_attached(tmp_path: Path) -> None:
    async with FakeWechat() as fake:
        write_credentials(tmp_path, fake)
        channel = WechatChannel(make_config(fake))
        async with wechat_runtime(channel, tmp_path) as rt:
            ref = fake.add_cdn_file(PNG, "base64_raw")
            await fake.add_message(ALICE, items=[{"type": 2, "image_item": ref}])
            [message] = await rt.wait_for_messages(1)
            [media] = message.media
            assert media.kind is MediaKind.IMAGE
            assert media.mime_type == "image/png"
            path = Path(media.path)
            assert path.parent == tmp_path / "media" / "wechat"
            assert path.read_bytes() == PNG
            assert fake.cdn_requests == [ref["media"]["encrypt_query_param"]]


@pytest.mark.parametrize("key_format", ["base64_hex", "hex_aeskey", "none"])
async def test_every_key_form_decrypts(tmp_path: Path, key_format: str) -> None:
    async with FakeWechat() as fake:
        write_credentials(tmp_path, fake)
        channel = WechatChannel(make_config(fake))
        async with wechat_runtime(channel, tmp_path) as rt:
            ref = fake.add_cdn_file(PNG, key_format)  # type: ignore[arg-type]
            await fake.add_message(ALICE, items=[{"type": 2, "image_item": ref}])
            [message] = await rt.wait_for_messages(1)
            assert Path(message.media[0].path).read_bytes() == PNG


async def test_file_keeps_its_name_and_text_rides_along(tmp_path: Path) -> None:
    async with FakeWechat() as fake:
        write_credentials(tmp_path, fake)
        channel = WechatChannel(make_config(fake, media_dir=str(tmp_path / "elsewhere")))
        async with wechat_runtime(channel, tmp_path) as rt:
            data = b"%PDF-1.4 report body " * 50
            ref = fake.add_cdn_file(data, "base64_hex")
            items = [
                {"type": 1, "text_item": {"text": "see attached"}},
                {"type": 4, "file_item": {**ref, "file_name": "Q3 report.pdf", "len": "1050"}},
            ]
            await fake.add_message(ALICE, items=items)
            [message] = await rt.wait_for_messages(1)
            assert message.text == "see attached"
            [media] = message.media
            assert media.kind is MediaKind.FILE
            assert media.name == "Q3 report.pdf"
            assert Path(media.path).parent == tmp_path / "elsewhere"
            assert Path(media.path).read_bytes() == data


async def test_failed_download_keeps_the_message_with_a_note(tmp_path: Path) -> None:
    async with FakeWechat() as fake:
        write_credentials(tmp_path, fake)
        channel = WechatChannel(make_config(fake))
        async with wechat_runtime(channel, tmp_path) as rt:
            ref = fake.add_cdn_file(PNG)
            fake.cdn.clear()  # the CDN lost it: 404
            await fake.add_message(ALICE, items=[{"type": 2, "image_item": ref}])
            [message] = await rt.wait_for_messages(1)
            assert message.media == ()
            assert message.text == "[image could not be downloaded]"


async def test_voice_transcript_and_quote_become_text_and_reply_to(tmp_path: Path) -> None:
    async with FakeWechat() as fake:
        write_credentials(tmp_path, fake)
        channel = WechatChannel(make_config(fake))
        async with wechat_runtime(channel, tmp_path) as rt:
            await fake.add_message(
                ALICE,
                items=[{"type": 3, "voice_item": {"text": "call mum at six", "encode_type": 6}}],
            )
            quoted = {"type": 1, "text_item": {"text": "the earlier answer"}}
            await fake.add_message(
                ALICE,
                items=[
                    {
                        "type": 1,
                        "text_item": {"text": "why?"},
                        "ref_msg": {"message_item": quoted, "title": "summary"},
                    }
                ],
            )
            await fake.add_message(
                ALICE,
                items=[{"type": 1, "text_item": {"text": "and?"}, "ref_msg": {"title": "a pic"}}],
            )
            voice, why, and_ = await rt.wait_for_messages(3)
            assert voice.text == "call mum at six"
            assert (why.text, why.reply_to) == ("why?", "the earlier answer")
            assert (and_.text, and_.reply_to) == ("and?", "a pic")


def test_aes_key_forms_and_bad_keys() -> None:
    key = secrets.token_bytes(16)
    assert parse_aes_key(base64.b64encode(key).decode()) == key
    assert parse_aes_key(base64.b64encode(key.hex().encode()).decode()) == key
    assert parse_aes_key(key.hex()) == key
    with pytest.raises(MediaError):
        parse_aes_key(base64.b64encode(b"short").decode())
    fixed = bytes(range(16))  # fixed keys: a random wrong key could unpad by chance
    blob = aes_ecb_encrypt(b"hello world", fixed)
    assert decrypt_ecb(blob, fixed) == b"hello world"
    with pytest.raises(MediaError):
        decrypt_ecb(blob, bytes(16))


async def test_a_video_is_downloaded_and_attached(tmp_path: Path) -> None:
    mp4 = b"\x00\x00\x00\x18ftypmp42" + secrets.token_bytes(200)
    async with FakeWechat() as fake:
        write_credentials(tmp_path, fake)
        channel = WechatChannel(make_config(fake))
        async with wechat_runtime(channel, tmp_path) as rt:
            ref = fake.add_cdn_file(mp4, "base64_raw")
            await fake.add_message(ALICE, items=[{"type": 5, "video_item": ref}])
            [message] = await rt.wait_for_messages(1)
    [media] = message.media
    assert (media.kind, media.mime_type) == (MediaKind.VIDEO, "video/mp4")
    assert Path(media.path).read_bytes() == mp4
    assert message.text == "[video]"


def _wav_tone(data: bytes) -> tuple[int, int, float, int]:
    """(channels, rate, seconds, zero crossings) of a 16-bit WAV."""
    with wave.open(io.BytesIO(data)) as wav:
        assert wav.getsampwidth() == 2
        frames = wav.readframes(wav.getnframes())
        samples = array.array("h", frames)
        crossings = sum(1 for a, b in itertools.pairwise(samples) if (a < 0) != (b < 0))
        return (
            wav.getnchannels(),
            wav.getframerate(),
            wav.getnframes() / wav.getframerate(),
            crossings,
        )


async def test_a_voice_note_without_transcript_is_downloaded_as_wav(tmp_path: Path) -> None:
    silk = silk_tone(seconds=1.0, hz=440)
    assert silk.startswith(b"\x02#!SILK_V3")  # WeChat's variant
    async with FakeWechat() as fake:
        write_credentials(tmp_path, fake)
        channel = WechatChannel(make_config(fake))
        async with wechat_runtime(channel, tmp_path) as rt:
            note = fake.add_voice_note(silk)
            await fake.add_message(ALICE, items=[note])
            [message] = await rt.wait_for_messages(1)
    assert fake.cdn_requests == [note["voice_item"]["media"]["encrypt_query_param"]]
    assert message.text == ""
    [media] = message.media
    assert (media.kind, media.mime_type) == (MediaKind.AUDIO, "audio/wav")
    assert Path(media.path).suffix == ".wav"
    channels, rate, seconds, crossings = _wav_tone(Path(media.path).read_bytes())
    assert (channels, rate) == (1, 16_000)
    assert 0.9 <= seconds <= 1.1
    assert 800 <= crossings <= 960  # a 440 Hz tone crosses zero 880 times a second


async def test_wechats_own_transcript_is_used_and_the_audio_left_alone(tmp_path: Path) -> None:
    async with FakeWechat() as fake:
        write_credentials(tmp_path, fake)
        channel = WechatChannel(make_config(fake))
        async with wechat_runtime(channel, tmp_path) as rt:
            note = fake.add_voice_note(silk_tone(0.2), text="buy oat milk")
            await fake.add_message(ALICE, items=[note])
            [message] = await rt.wait_for_messages(1)
    assert (message.text, message.media) == ("buy oat milk", ())
    assert fake.cdn_requests == []


async def test_a_voice_note_that_does_not_decode_keeps_the_message_with_a_note(
    tmp_path: Path,
) -> None:
    async with FakeWechat() as fake:
        write_credentials(tmp_path, fake)
        channel = WechatChannel(make_config(fake))
        async with wechat_runtime(channel, tmp_path) as rt:
            for broken in (
                b"\x02#!SILK_V3",  # a header and no sound
                b"\x02#!SILK_V3\x05\x00abc",  # a frame cut short
                b"not audio at all",
            ):
                await fake.add_message(ALICE, items=[fake.add_voice_note(broken)])
            received = await rt.wait_for_messages(3)
    for message in received:
        assert message.media == ()
        assert message.text == "[voice note could not be downloaded]"
