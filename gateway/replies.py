"""What a turn puts into the conversation besides the model's words: the user
message built from the inbound message(s), and the gateway's own replies when
a turn is stopped or fails (short and safe; details go to the log), and the
note on a reply delivered late."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from agent.messages import ChatMessage
from agent.providers.base import (
    ProviderAuthError,
    ProviderConfigError,
    ProviderError,
    ProviderRateLimited,
    ProviderUnavailable,
)
from gateway.bus import InboundMessage, MediaKind
from gateway.work import WorkItem

__all__ = [
    "EMPTY_REPLY",
    "GENERIC_FAILURE",
    "SESSION_RESET_NOTICE",
    "STOPPED_REPLY",
    "build_user_message",
    "format_duration",
    "late_note",
    "scheduled_failure",
    "unknown_agent",
    "user_facing_error",
]

STOPPED_REPLY = "Stopped. The running task was cancelled; send a new message to continue."
GENERIC_FAILURE = "Sorry, something went wrong while answering. The gateway log has the details."
EMPTY_REPLY = "(the model returned an empty reply)"
SESSION_RESET_NOTICE = "New session: the previous one is archived (/sessions lists it)."


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
            note = notes.get(media.path)  # a voice note's transcript (gateway.transcription)
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


def user_facing_error(exc: ProviderError) -> str:
    """Short, safe text for the chat; details go to the log."""
    if isinstance(exc, ProviderConfigError):
        return f"The gateway is not set up to answer yet: {exc}"
    if isinstance(exc, ProviderAuthError):
        return "The model provider rejected the gateway's API key. Ask the operator to check it."
    if isinstance(exc, ProviderRateLimited | ProviderUnavailable):
        return "The model provider is unavailable right now, even after retrying. Please try again later."
    return "The model provider could not answer this request. The gateway log has the details."


def unknown_agent(name: str) -> str:
    return f"This request asks for agent {name!r}, which this gateway does not have."


def scheduled_failure(job_id: str | None, text: str) -> str:
    """What a silent scheduled task's notify chat gets when the task fails."""
    return f"Scheduled task {job_id or '?'} failed: {text}"


def format_duration(secs: float) -> str:
    """Two units at most: `45 s`, `12 min`, `3 h 5 min`, `2 d 4 h`."""
    total = max(0, int(secs))
    days, rest = divmod(total, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, seconds = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h" if hours else f"{days} d"
    if hours:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    if minutes:
        return f"{minutes} min"
    return f"{seconds} s"


def late_note(waited_secs: float) -> str:
    """Appended to a reply that waited long in the outbox (at the end, so the
    parts of a long reply sent by an earlier attempt stay the same)."""
    return (
        f"\n\n(Sent late: this reply was written {format_duration(waited_secs)} ago "
        "and could not be delivered until now.)"
    )
