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

import aiohttp
import structlog

from gateway.bus import MediaKind, storable
from gateway.config.core import Config
from gateway.work import WorkItem

__all__ = ["Transcriber", "TranscriptionError", "build_transcriber", "transcribe_items"]

log = structlog.get_logger(__name__)

_MAX_BYTES = 25_000_000  # OpenAI's upload limit for speech-to-text
_OPENAI_BASE_URL = "https://api.openai.com/v1"


class Transcriber:
    """One speech-to-text model behind an OpenAI-compatible base URL. Each call
    opens its own short-lived HTTP session: nothing to close at shutdown, and
    voice notes are rare enough that connection reuse does not matter."""

    def __init__(self, base_url: str, api_key: str, model: str, timeout_secs: float) -> None:
        self._url = base_url.rstrip("/") + "/audio/transcriptions"
        self._api_key = api_key
        self._model = model
        self._timeout = aiohttp.ClientTimeout(total=timeout_secs)

    async def transcribe(self, path: Path) -> str:
        data = await asyncio.to_thread(path.read_bytes)
        if len(data) > _MAX_BYTES:
            raise ValueError(f"voice note of {len(data)} bytes is over the {_MAX_BYTES} limit")
        form = aiohttp.FormData()
        form.add_field("model", self._model)
        form.add_field("file", data, filename=path.name)
        headers = {"Authorization": f"Bearer {self._api_key}"}
        async with (
            aiohttp.ClientSession(timeout=self._timeout) as session,
            session.post(self._url, data=form, headers=headers) as resp,
        ):
            if resp.status != 200:
                raise TranscriptionError(f"HTTP {resp.status}")
            body = await resp.json(content_type=None)
        text = body.get("text") if isinstance(body, dict) else None
        if not isinstance(text, str):
            raise TranscriptionError("answer without text")
        # json reads an escaped half of a surrogate pair as a lone surrogate,
        # which no store can encode: the turn would crash before it began
        return storable(text).strip()


class TranscriptionError(Exception):
    pass


def build_transcriber(config: Config, agent_name: str) -> Transcriber | None:
    """The agent's transcriber, or None when its model names none (or its
    provider is not OpenAI-compatible)."""
    agent = config.agents[agent_name]
    model = config.models[agent.model].transcription
    provider = config.providers[agent.provider]
    if model is None or provider.type != "openai":
        return None
    base_url = provider.base_url or _OPENAI_BASE_URL
    key = provider.api_key.get_secret_value()
    return Transcriber(base_url, key, model, provider.llm_timeout_secs)


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
