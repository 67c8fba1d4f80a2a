"""What a turn puts into the conversation besides the model's words: the user
message built from the inbound message(s) (for the model: English), and the
gateway's own replies when a turn is stopped or fails (short and safe; details
go to the log), and the note on a reply delivered late — those in the chat's
locale, from the catalogue (gateway.i18n)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from agent.messages import ChatMessage
from agent.providers.base import (
    ProviderAuthError,
    ProviderConfigError,
    ProviderError,
    ProviderKeyMissing,
    ProviderRateLimited,
    ProviderUnavailable,
)
from gateway.bus import InboundMessage, MediaKind
from gateway.i18n import Locale, Msg, tr
from gateway.work import WorkItem

__all__ = [
    "build_user_message",
    "format_duration",
    "late_note",
    "scheduled_failure",
    "unknown_agent",
    "user_facing_error",
]


def _user_text(
    item: InboundMessage, vision: bool, notes: Mapping[str, str]
) -> tuple[str, tuple[str, ...]]:
    parts: list[str] = []
    if item.reply_to:
        parts.append(f"[Replying to: {item.reply_to}]")
    if item.text:
        parts.append(item.text)
    images: list[str] = []
    for media in item.media:
        if media.kind is MediaKind.IMAGE and vision:
            images.append(media.path)
        else:
            label = media.name or media.kind.value
            line = f"[Attached {media.kind.value}: {label} at {media.path}]"
            note = notes.get(media.path)  # a voice note's transcript (gateway.turns.transcription)
            parts.append(f"{line} {note}" if note else line)
    return "\n".join(parts), tuple(images)


def build_user_message(
    items: Sequence[WorkItem], vision: bool, notes: Mapping[str, str] | None = None
) -> ChatMessage:
    """One user message per turn; messages collected while busy are numbered.
    `notes`: what to say about an attachment, by path (voice transcripts)."""
    notes = notes or {}
    if len(items) == 1:
        text, images = _user_text(items[0].message, vision, notes)
        return ChatMessage.user(text, images)
    chunks = [f"[{len(items)} messages arrived while you were busy; answer them together.]"]
    all_images: list[str] = []
    for n, item in enumerate(items, 1):
        text, images = _user_text(item.message, vision, notes)
        chunks.append(f"[{n}] {text}")
        all_images.extend(images)
    return ChatMessage.user("\n\n".join(chunks), tuple(all_images))


def user_facing_error(locale: Locale, exc: ProviderError) -> str:
    """Short, safe text for the chat; details go to the log."""
    if isinstance(exc, ProviderKeyMissing):
        return tr(locale, Msg.NO_API_KEY, provider=exc.provider, setting=exc.setting)
    if isinstance(exc, ProviderConfigError):
        return tr(locale, Msg.NOT_SET_UP, detail=exc)
    if isinstance(exc, ProviderAuthError):
        return tr(locale, Msg.PROVIDER_AUTH)
    if isinstance(exc, ProviderRateLimited | ProviderUnavailable):
        return tr(locale, Msg.PROVIDER_UNAVAILABLE)
    return tr(locale, Msg.PROVIDER_FAILED)


def unknown_agent(locale: Locale, name: str) -> str:
    return tr(locale, Msg.UNKNOWN_AGENT, name=name)


def scheduled_failure(locale: Locale, job_id: str | None, text: str) -> str:
    """What a silent scheduled task's notify chat gets when the task fails."""
    return tr(locale, Msg.SCHEDULED_FAILED, job=job_id or "?", reason=text)


def format_duration(secs: float, locale: Locale = Locale.EN) -> str:
    """Two units at most: `45 s`, `12 min`, `3 h 5 min`, `2 d 4 h` (in English)."""
    total = max(0, int(secs))
    days, rest = divmod(total, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, seconds = divmod(rest, 60)
    if days:
        units = [(days, Msg.DAYS), (hours, Msg.HOURS)]
    elif hours:
        units = [(hours, Msg.HOURS), (minutes, Msg.MINUTES)]
    elif minutes:
        units = [(minutes, Msg.MINUTES)]
    else:
        units = [(seconds, Msg.SECONDS)]
    return " ".join(tr(locale, key, n=n) for i, (n, key) in enumerate(units) if n or i == 0)


def late_note(waited_secs: float, locale: Locale = Locale.EN) -> str:
    """Appended to a reply that waited long in the outbox (at the end, so the
    parts of a long reply sent by an earlier attempt stay the same)."""
    return "\n\n" + tr(locale, Msg.LATE_NOTE, waited=format_duration(waited_secs, locale))
