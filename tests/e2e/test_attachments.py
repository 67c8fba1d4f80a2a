"""Received attachments the agent can use: a PDF sent on Telegram is readable
by the `read` tool at the path the user message names (read-only)."""

from __future__ import annotations

import dataclasses
import re
import zlib
from pathlib import Path
from typing import Any

from gateway.config.loading import LoadedConfig
from tests.e2e.test_telegram import telegram_config
from tests.fakes.openai_server import FakeOpenAI, Reply, ScriptedToolCall
from tests.fakes.telegram_server import FakeTelegram
from tests.support import newest, running_gateway


def simple_pdf(*lines: str) -> bytes:
    """A one-page PDF whose content stream (FlateDecode) shows `lines`."""
    shown = " ".join(f"({line}) Tj 0 -14 Td" for line in lines)
    stream = zlib.compress(f"BT /F1 12 Tf 72 720 Td {shown} ET".encode())
    head = f"4 0 obj << /Length {len(stream)} /Filter /FlateDecode >>\nstream\n".encode()
    return (
        b"%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n"
        + head
        + stream
        + b"\nendstream\nendobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"
    )


def _text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


async def test_a_received_pdf_is_readable_by_the_read_tool(home: Path, llm: FakeOpenAI) -> None:
    pdf = simple_pdf("Invoice 2026-117", "Total: 42.50 EUR")
    tool_results: list[str] = []

    async def responder(body: dict[str, Any]) -> Reply | None:
        answered = [m for m in body["messages"] if m["role"] == "tool"]
        if answered:
            tool_results.append(_text_of(answered[-1]))
            return Reply(text="The total is 42.50 EUR.")
        found = re.search(r"at (/\S+\.pdf)\]", _text_of(newest(body)))
        assert found is not None, newest(body)
        return Reply(tool_calls=(ScriptedToolCall("read", {"path": found.group(1)}),))

    llm.responder = responder
    async with FakeTelegram() as tg:
        doc = tg.add_file(pdf, "documents/file_9.pdf")
        loaded = telegram_config(home, llm, tg)
        async with running_gateway(loaded):
            document = {
                "file_id": doc,
                "file_unique_id": "d9",
                "file_name": "invoice.pdf",
                "mime_type": "application/pdf",
                "file_size": len(pdf),
            }
            await tg.add_message(None, caption="what is the total?", document=document)
            await tg.wait_for(lambda: len(tg.sent_texts) >= 1, timeout=10)
        assert tg.sent_texts == ["The total is 42.50 EUR."]
    [result] = tool_results
    assert "Invoice 2026-117\nTotal: 42.50 EUR" in result
    assert "outside the workspace" not in result


def with_transcription(loaded: LoadedConfig) -> LoadedConfig:
    """`loaded` with its default model transcribing voice notes (whisper-1)."""
    model = loaded.config.models["default"].model_copy(update={"transcription": "whisper-1"})
    config = loaded.config.model_copy(update={"models": {"default": model}})
    return dataclasses.replace(loaded, config=config)


async def send_voice_note(tg: FakeTelegram, ogg: bytes) -> None:
    """A voice note of `ogg` sent on Telegram, and its reply awaited."""
    voice = tg.add_file(ogg, f"voice/file_{zlib.crc32(ogg)}.oga")
    media = {"file_id": voice, "file_unique_id": f"v{zlib.crc32(ogg)}", "duration": 2}
    answered = len(tg.sent_texts) + 1
    await tg.add_message(None, voice={**media, "mime_type": "audio/ogg"})
    await tg.wait_for(lambda: len(tg.sent_texts) >= answered, timeout=10)


async def test_a_voice_note_is_transcribed_into_the_user_message(
    home: Path, llm: FakeOpenAI
) -> None:
    ogg = b"OggS\x00fake-opus-voice-note"
    llm.transcripts[ogg] = "remind me to water the plants"
    async with (
        FakeTelegram() as tg,
        running_gateway(with_transcription(telegram_config(home, llm, tg))),
    ):
        await send_voice_note(tg, ogg)
    [(model, _, data)] = llm.transcription_requests
    assert (model, data) == ("whisper-1", ogg)
    user = _text_of(newest(llm.requests[0]))
    assert "Transcript: remind me to water the plants" in user


async def test_without_transcription_a_voice_note_is_said_plainly(
    home: Path, llm: FakeOpenAI
) -> None:
    async with FakeTelegram() as tg:
        voice = tg.add_file(b"OggS\x00unheard", "voice/file_5.oga")
        async with running_gateway(telegram_config(home, llm, tg)):
            media = {"file_id": voice, "file_unique_id": "v5", "duration": 1}
            await tg.add_message(None, voice={**media, "mime_type": "audio/ogg"})
            await tg.wait_for(lambda: len(tg.sent_texts) >= 1, timeout=10)
    assert llm.transcription_requests == []
    assert "no transcription is configured" in _text_of(newest(llm.requests[0]))
