"""WeChat voice notes end to end: fake iLink (SILK on its CDN) ⇄ the real
gateway ⇄ the fake OpenAI server's speech-to-text and chat endpoints."""

from __future__ import annotations

import io
import wave
from pathlib import Path
from typing import Any

from tests.channels.test_wechat_support import write_credentials
from tests.e2e.test_attachments import with_transcription
from tests.e2e.test_wechat import ALICE, wechat_config
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.wechat_server import FakeWechat, silk_as_wav, silk_tone
from tests.support import newest, running_gateway


def _text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


async def test_a_wechat_voice_note_is_transcribed_into_the_user_message(
    home: Path, llm: FakeOpenAI
) -> None:
    silk = silk_tone(seconds=1.0)
    llm.transcripts[silk_as_wav(silk)] = "remind me to call the plumber"
    async with FakeWechat() as fake:
        write_credentials(home, fake)
        async with running_gateway(with_transcription(wechat_config(home, llm, fake))):
            await fake.add_message(ALICE, items=[fake.add_voice_note(silk)])
            await fake.wait_for(lambda: len(fake.sent) >= 1, timeout=10)
    [(model, name, data)] = llm.transcription_requests
    assert model == "whisper-1"
    assert name.endswith(".wav")
    with wave.open(io.BytesIO(data)) as wav:  # audio the endpoint takes, not SILK
        assert (wav.getnchannels(), wav.getframerate()) == (1, 16_000)
        assert 0.9 <= wav.getnframes() / 16_000 <= 1.1
    user = _text_of(newest(llm.requests[0]))
    assert "Transcript: remind me to call the plumber" in user
    assert fake.protocol_errors == []


async def test_wechats_own_transcript_reaches_the_model_without_speech_to_text(
    home: Path, llm: FakeOpenAI
) -> None:
    async with FakeWechat() as fake:
        write_credentials(home, fake)
        async with running_gateway(with_transcription(wechat_config(home, llm, fake))):
            note = fake.add_voice_note(silk_tone(0.3), text="the meeting moved to four")
            await fake.add_message(ALICE, items=[note])
            await fake.wait_for(lambda: len(fake.sent) >= 1, timeout=10)
    assert llm.transcription_requests == []
    assert fake.cdn_requests == []
    assert "the meeting moved to four" in _text_of(newest(llm.requests[0]))
