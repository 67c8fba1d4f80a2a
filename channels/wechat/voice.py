"""WeChat voice notes as audio a speech-to-text endpoint takes.

iLink voice items are SILK v3 (`encode_type` 6; Tencent's variant starts with
a `0x02` byte before `#!SILK_V3`), which no OpenAI-compatible transcription
endpoint accepts, so they are decoded here (silk-python, a binding of the
reference SILK decoder) to 16 kHz mono 16-bit WAV. MP3, Ogg, WAV and AMR
notes are kept as they come. Decoding is CPU work: call from a worker thread.
A decoded note is capped at `MAX_PCM_BYTES` (a small SILK file can expand a
thousandfold): decoding stops there rather than filling memory.
"""

from __future__ import annotations

import io
import wave
from dataclasses import dataclass

import pysilk

__all__ = [
    "MAX_PCM_BYTES",
    "SAMPLE_RATE",
    "Audio",
    "VoiceError",
    "is_silk",
    "silk_to_wav",
    "voice_to_audio",
]

SAMPLE_RATE = 16_000  # what speech models resample to anyway: 32 kB a second
# under the 25 MB OpenAI takes in one upload: about 12 minutes of speech
MAX_PCM_BYTES = 24_000_000

_SILK = b"#!SILK_V3"
_PASSED_THROUGH = (
    (b"ID3", "audio/mpeg", ".mp3"),
    (b"\xff\xfb", "audio/mpeg", ".mp3"),
    (b"\xff\xf3", "audio/mpeg", ".mp3"),
    (b"OggS", "audio/ogg", ".ogg"),
    (b"#!AMR", "audio/amr", ".amr"),
)


class VoiceError(Exception):
    """A voice note that is neither SILK nor a format kept as it is, or whose
    SILK does not decode (within the cap)."""


@dataclass(frozen=True, slots=True)
class Audio:
    data: bytes
    mime_type: str
    suffix: str


class _CappedBuffer(io.RawIOBase):
    def __init__(self, limit: int) -> None:
        super().__init__()
        self.buffer = bytearray()
        self._limit = limit

    def writable(self) -> bool:
        return True

    def write(self, data: bytes | bytearray | memoryview) -> int:  # type: ignore[override]
        if len(self.buffer) + len(data) > self._limit:
            raise VoiceError(f"voice note decodes to more than {self._limit} bytes")
        self.buffer += data
        return len(data)


def is_silk(data: bytes) -> bool:
    return data.startswith(_SILK) or data[1:].startswith(_SILK)


def silk_to_wav(data: bytes, max_pcm_bytes: int = MAX_PCM_BYTES) -> bytes:
    pcm = _CappedBuffer(max_pcm_bytes)
    try:
        pysilk.decode(io.BytesIO(data), pcm, SAMPLE_RATE)
    except pysilk.SilkError as exc:
        raise VoiceError(f"SILK does not decode: {exc}") from None
    if not pcm.buffer:
        raise VoiceError("SILK decodes to no sound")
    out = io.BytesIO()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(SAMPLE_RATE)
        wav.writeframes(bytes(pcm.buffer))
    return out.getvalue()


def voice_to_audio(data: bytes, max_pcm_bytes: int = MAX_PCM_BYTES) -> Audio:
    """The note as a file a transcription endpoint takes (SILK → WAV)."""
    if is_silk(data):
        return Audio(silk_to_wav(data, max_pcm_bytes), "audio/wav", ".wav")
    if data.startswith(b"RIFF") and data[8:12] == b"WAVE":
        return Audio(data, "audio/wav", ".wav")
    for magic, mime, suffix in _PASSED_THROUGH:
        if data.startswith(magic):
            return Audio(data, mime, suffix)
    raise VoiceError("voice note in an unknown format (not SILK, MP3, Ogg, WAV or AMR)")
