"""Message types and the bus between channels and the runtime.

A leaf module: it imports no project module. Channels publish
`InboundMessage`s with `MessageBus.submit`, which returns only once the gateway
has durably recorded the message (or recognised it as a duplicate), so a
channel can acknowledge its platform after `submit` returns and not before.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

__all__ = [
    "BusClosed",
    "ChannelEvent",
    "ChatType",
    "EventKind",
    "InboundMessage",
    "MediaKind",
    "MediaRef",
    "MessageBus",
    "OutboundMessage",
    "Receipt",
    "reply_handle",
]


class BusClosed(Exception):
    """Raised by `submit` once the gateway has stopped taking messages."""


class ChatType(StrEnum):
    DIRECT = "direct"
    GROUP = "group"


class MediaKind(StrEnum):
    IMAGE = "image"
    FILE = "file"
    AUDIO = "audio"
    VIDEO = "video"


class Receipt(StrEnum):
    ACCEPTED = "accepted"  # recorded; a reply will follow
    DUPLICATE = "duplicate"  # seen before; nothing new happens


@dataclass(frozen=True, slots=True)
class MediaRef:
    kind: MediaKind
    path: str  # local file, already downloaded by the channel
    mime_type: str | None = None
    name: str | None = None


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(slots=True)
class InboundMessage:
    channel: str
    chat_id: str
    sender_id: str
    text: str
    message_id: str  # the platform's id: the dedup key with `channel`
    chat_type: ChatType = ChatType.DIRECT
    media: tuple[MediaRef, ...] = ()
    reply_to: str | None = None  # quoted text the user replied to, as context
    mentions: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    received_at: datetime = field(default_factory=_now)
    # The platform's handle to reply to this message when it differs from the
    # dedup key `message_id` (Feishu: event id vs. om_ message id).
    reply_ref: str | None = None
    # Resolved by the gateway once the message is durable (or known duplicate).
    receipt: asyncio.Future[Receipt] | None = field(default=None, compare=False, repr=False)


def reply_handle(message: InboundMessage) -> str:
    """What replies to `message` carry as `reply_to_message_id`."""
    return message.reply_ref or message.message_id


@dataclass(frozen=True, slots=True)
class OutboundMessage:
    channel: str
    chat_id: str
    text: str
    outbox_id: int | None = None  # the durable row; stable across retries
    reply_to_message_id: str | None = None  # platform id of the message answered
    session_id: str | None = None
    attempt: int = 1
    metadata: dict[str, Any] = field(default_factory=dict)


class EventKind(StrEnum):
    WORKING = "working"  # a turn started for this chat
    IDLE = "idle"  # the turn ended
    DELTA = "delta"  # streamed text of the reply in progress


@dataclass(frozen=True, slots=True)
class ChannelEvent:
    """Best-effort, non-durable signal to a channel (typing, streaming)."""

    kind: EventKind
    channel: str
    chat_id: str
    session_id: str
    run_id: str
    text: str = ""
    reply_to_message_id: str | None = None


class MessageBus:
    """Bounded inbound queue with durable receipts."""

    def __init__(self, inbound_capacity: int = 1024) -> None:
        self.inbound: asyncio.Queue[InboundMessage] = asyncio.Queue(inbound_capacity)
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Refuse new messages; those already queued are still processed."""
        self._closed = True

    async def submit(self, message: InboundMessage) -> Receipt:
        """Queue `message` and wait until it is durably recorded."""
        if self._closed:
            raise BusClosed("the gateway is shutting down")
        loop = asyncio.get_running_loop()
        message.receipt = loop.create_future()
        await self.inbound.put(message)
        return await message.receipt
