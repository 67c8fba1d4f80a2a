"""SILK voice notes to WAV (channels.wechat.voice): other formats kept, decoding capped."""

from __future__ import annotations

import secrets

import pytest

from channels.wechat.voice import Audio, VoiceError, is_silk, voice_to_audio
from tests.fakes.wechat_server import silk_as_wav, silk_tone


def test_voice_formats_other_than_silk_pass_through_and_decoding_is_capped() -> None:
    mp3 = b"ID3\x04\x00" + secrets.token_bytes(100)
    assert voice_to_audio(mp3) == Audio(mp3, "audio/mpeg", ".mp3")
    ogg = b"OggS\x00" + secrets.token_bytes(100)
    assert voice_to_audio(ogg).suffix == ".ogg"
    with pytest.raises(VoiceError):
        voice_to_audio(b"\x00" * 100)
    # a note that would decode past the cap stops there, not in memory
    with pytest.raises(VoiceError, match="more than 1000 bytes"):
        voice_to_audio(silk_tone(1.0), max_pcm_bytes=1000)


def test_silk_with_and_without_wechats_leading_byte_decodes_alike() -> None:
    silk = silk_tone(0.5)
    plain = silk[1:]  # the standard header, without Tencent's 0x02
    assert is_silk(silk)
    assert is_silk(plain)
    assert voice_to_audio(silk).data == silk_as_wav(silk)
    assert voice_to_audio(plain).data == silk_as_wav(silk)
