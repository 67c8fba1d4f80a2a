"""Voice notes as text: the provider's speech-to-text endpoint, before the turn.

When the agent's model names a `transcription` model (models.<name>.transcription)
and its provider speaks the OpenAI API, every audio attachment of a new user
message is sent to `POST {base_url}/audio/transcriptions` and the transcript
goes into the user message (stored with it, so it is transcribed once). A
failed transcription, or none configured, is said plainly in the message
instead: the agent knows it got a voice note it cannot hear.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path

import openai
import structlog

from gateway.bus import MediaKind
from gateway.config import Config
from gateway.work import WorkItem

__all__ = ["Transcriber", "build_transcriber", "transcribe_items"]

log = structlog.get_logger(__name__)

_MAX_BYTES = 25_000_000  # OpenAI's upload limit for speech-to-text


class Transcriber:
    def __init__(self, client: openai.AsyncOpenAI, model: str, timeout_secs: float) -> None:
        self._client = client
        self._model = model
        self._timeout = timeout_secs

    async def transcribe(self, path: Path) -> str:
        data = await asyncio.to_thread(path.read_bytes)
        if len(data) > _MAX_BYTES:
            raise ValueError(f"voice note of {len(data)} bytes is over the {_MAX_BYTES} limit")
        answer = await self._client.audio.transcriptions.create(
            model=self._model, file=(path.name, data), timeout=self._timeout
        )
        return answer.text.strip()


def build_transcriber(config: Config, agent_name: str) -> Transcriber | None:
    """The agent's transcriber, or None when its model names none (or its
    provider is not OpenAI-compatible)."""
    agent = config.agents[agent_name]
    model = config.models[agent.model].transcription
    provider = config.providers[agent.provider]
    if model is None or provider.type != "openai":
        return None
    client = openai.AsyncOpenAI(
        api_key=provider.api_key.get_secret_value() or "unset",
        base_url=provider.base_url,
        max_retries=provider.max_retries,
    )
    return Transcriber(client, model, provider.llm_timeout_secs)


async def transcribe_items(
    items: Sequence[WorkItem], transcriber: Transcriber | None
) -> Mapping[str, str]:
    """Audio path → what the user message says about it: the transcript, or
    why there is none."""
    notes: dict[str, str] = {}
    for item in items:
        for media in item.message.media:
            if media.kind is not MediaKind.AUDIO or media.path in notes:
                continue
            if transcriber is None:
                notes[media.path] = "(no transcription is configured: the voice note was not heard)"
                continue
            try:
                text = await transcriber.transcribe(Path(media.path))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the turn goes on without it, saying so
                log.warning("transcription_failed", error=type(exc).__name__)
                notes[media.path] = "(the voice note could not be transcribed)"
                continue
            notes[media.path] = f"Transcript: {text}" if text else "(the voice note is silent)"
    return notes
