"""Feishu message event → InboundMessage, shared by webhook and long-connection mode.

Filters what is no message of a person (other event types, bot senders) and
re-pushes of the same content under a new id, downloads media, fetches the
quoted parent message, then `bus.submit`s and returns only once the message is
durable; the caller acknowledges Feishu after that. Who is answered, and in
which groups, is the gateway's access policy (gateway.access.policy): the message
carries the sender's other ids and whether it @mentions the bot. The event_id is the message_id, so the
gateway's inbox deduplicates redeliveries durably.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import structlog

from channels.base import ChannelError, ChannelRuntime
from channels.feishu.api import FeishuApi
from channels.feishu.cards import CARD_ACTION_EVENT, card_press
from channels.feishu.config import FeishuConfig
from channels.feishu.parse import (
    MESSAGE_EVENT,
    Envelope,
    EventFormatError,
    ParsedMessage,
    content_text,
    parse_mentions,
    parse_message,
)
from gateway.bus import ChatType, InboundMessage, MediaRef

__all__ = ["ContentGuard", "InboundHandler", "MessageIdMap"]

log = structlog.get_logger("channels.feishu.inbound")

_RECORDED_MAX = 10_000
_FORWARD_MAX_CHARS = 8_000  # a merged forward of a long chat: its start is enough


class ContentGuard:
    """Recently seen (sender, create_time, content) → event_id; bounded, time-limited."""

    def __init__(self, window_secs: float = 600.0, max_entries: int = 10_000) -> None:
        self._window = window_secs
        self._max = max_entries
        self._seen: OrderedDict[str, tuple[float, str]] = OrderedDict()

    @staticmethod
    def key(parsed: ParsedMessage) -> str:
        material = "\x1f".join((parsed.sender_open_id, parsed.create_time, parsed.raw_content))
        return hashlib.sha256(material.encode()).hexdigest()

    def claim(self, key: str, event_id: str) -> bool:
        """False if the same content was seen under another event id in the window."""
        now = time.monotonic()
        while self._seen:
            oldest_key, (at, _) = next(iter(self._seen.items()))
            if now - at <= self._window and len(self._seen) < self._max:
                break
            del self._seen[oldest_key]
        seen = self._seen.get(key)
        if seen is not None and seen[1] != event_id:
            return False
        self._seen[key] = (now, event_id)
        return True

    def release(self, key: str, event_id: str) -> None:
        seen = self._seen.get(key)
        if seen is not None and seen[1] == event_id:
            del self._seen[key]


class MessageIdMap:
    """event_id → Feishu message id (om_…) of recent inbound messages, bounded."""

    def __init__(self, max_entries: int = 10_000) -> None:
        self._max = max_entries
        self._ids: OrderedDict[str, str] = OrderedDict()

    def add(self, event_id: str, message_id: str) -> None:
        self._ids[event_id] = message_id
        self._ids.move_to_end(event_id)
        while len(self._ids) > self._max:
            self._ids.popitem(last=False)

    def resolve(self, inbound_id: str | None) -> str | None:
        if not inbound_id:
            return None
        if inbound_id.startswith("om_"):
            return inbound_id
        return self._ids.get(inbound_id)


class InboundHandler:
    def __init__(
        self,
        config: FeishuConfig,
        api: FeishuApi,
        runtime: ChannelRuntime,
        bot_open_id: Callable[[], Awaitable[str | None]],
        ids: MessageIdMap,
    ) -> None:
        self._config = config
        self._api = api
        self._runtime = runtime
        self._bot_open_id = bot_open_id
        self._ids = ids
        self._guard = ContentGuard()
        self._recorded: OrderedDict[str, None] = OrderedDict()
        base = Path(config.media_dir).expanduser() if config.media_dir else None
        self._media_dir = base or runtime.media_dir / "feishu"

    async def handle(self, envelope: Envelope) -> None:
        """Record one event; returns once durable (or deliberately ignored)."""
        if envelope.event_type == CARD_ACTION_EVENT:  # Approve / Deny (channels/feishu/cards.py)
            if (press := card_press(envelope, "feishu")) is not None:
                await self._runtime.bus.submit(press)
            return
        if envelope.event_type != MESSAGE_EVENT:
            log.debug("feishu: event type ignored", event_type=envelope.event_type)
            return
        if envelope.event_id in self._recorded:
            # A redelivery of an event already durable: acknowledge without re-downloading.
            log.debug("feishu: redelivery of a recorded event", event_id=envelope.event_id)
            return
        bot_id = await self._bot_open_id()
        try:
            parsed = parse_message(envelope.event, bot_id)
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            # the event cannot be read: a dead letter for the caller, not a retry
            raise EventFormatError(f"unreadable message event: {type(exc).__name__}") from exc
        if parsed.sender_type not in {"user", ""}:
            log.debug("feishu: message from a non-user sender ignored", sender=parsed.sender_type)
            return
        guard_key = ContentGuard.key(parsed)
        if not self._guard.claim(guard_key, envelope.event_id):
            log.info(
                "feishu: re-push of recent content under a new id ignored",
                event_id=envelope.event_id,
                message_id=parsed.message_id,
            )
            return
        try:
            message = await self._build(envelope, parsed)
            if message is None:
                return
            self._ids.add(envelope.event_id, parsed.message_id)
            await self._runtime.bus.submit(message)
            self._remember_recorded(envelope.event_id)
        except BaseException:
            self._guard.release(guard_key, envelope.event_id)
            raise

    def _remember_recorded(self, event_id: str) -> None:
        self._recorded[event_id] = None
        while len(self._recorded) > _RECORDED_MAX:
            self._recorded.popitem(last=False)

    async def _build(self, envelope: Envelope, parsed: ParsedMessage) -> InboundMessage | None:
        text = parsed.text
        if parsed.msg_type == "merge_forward":
            text = await self._forwarded(parsed.message_id) or text
        media: list[MediaRef] = []
        for item in parsed.media:
            try:
                got = await self._api.download_resource(
                    parsed.message_id,
                    item.key,
                    item.resource_type,
                    self._media_dir,
                    self._config.max_media_bytes,
                )
            except ChannelError as exc:
                log.warning("feishu: media download failed", kind=item.kind.value, error=str(exc))
                text = f"{text}\n[{item.kind.value} could not be downloaded]".strip()
                continue
            media.append(MediaRef(item.kind, str(got.path), got.mime_type, got.name or item.name))
        if not text and not media:
            log.debug("feishu: empty message ignored", message_id=parsed.message_id)
            return None
        bot_id = await self._bot_open_id()
        mentioned = parsed.bot_mentioned or bool(envelope.event.get("v1_is_mention"))
        return InboundMessage(
            channel="feishu",
            chat_id=parsed.chat_id,
            sender_id=parsed.sender_open_id,
            text=text,
            message_id=envelope.event_id,
            reply_ref=parsed.message_id,  # replies and reactions need the om_ id
            chat_type=parsed.chat_type,
            media=tuple(media),
            reply_to=await self._reply_context(parsed.parent_id),
            mentions=tuple(m.open_id for m in parsed.mentions if m.open_id != bot_id),
            sender_aliases=tuple(i for i in parsed.sender_ids if i != parsed.sender_open_id),
            addressed=parsed.chat_type is ChatType.DIRECT or mentioned,
            metadata={
                "feishu_message_id": parsed.message_id,
                "event_id": envelope.event_id,
                "msg_type": parsed.msg_type,
                "root_id": parsed.root_id,
                "thread_id": parsed.thread_id,
                "create_time": parsed.create_time,
            },
        )

    async def _forwarded(self, message_id: str) -> str | None:
        """The text of the messages a merged forward carries, one per line."""
        try:
            items = await self._api.get_message_items(message_id)
        except ChannelError as exc:
            log.warning("feishu: forwarded messages unavailable", error=str(exc))
            return None
        lines = ["[merged forward]"]
        for item in items:
            if item.get("upper_message_id") != message_id:
                continue  # the forward itself
            text = _item_text(item)
            if text:
                lines.append(f"- {text}")
        return "\n".join(lines)[:_FORWARD_MAX_CHARS] if len(lines) > 1 else None

    async def _reply_context(self, parent_id: str | None) -> str | None:
        limit = self._config.reply_context_max_chars
        if not parent_id or limit <= 0:
            return None
        try:
            item = await self._api.get_message(parent_id)
        except ChannelError as exc:
            log.warning("feishu: quoted message unavailable", parent_id=parent_id, error=str(exc))
            return None
        if item is None:
            return None
        return _item_text(item)[:limit] or None


def _item_text(item: dict[str, Any]) -> str:
    """The text of a message as the API returns it (`body.content`)."""
    body = item.get("body")
    raw = body.get("content") if isinstance(body, dict) else None
    try:
        content = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        content = None
    mentions = tuple(parse_mentions(item.get("mentions")))
    text, _ = content_text(str(item.get("msg_type") or "text"), content, mentions)
    return text
