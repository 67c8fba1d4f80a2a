"""Feishu event envelopes and message content → plain values.

Pure functions, no I/O: `parse_envelope` reads a v2.0 or v1 event body,
`parse_message` turns an `im.message.receive_v1` event into a `ParsedMessage`
(text with @_user_N placeholders resolved and the bot's own mention removed,
media keys to download), `content_text` renders any message content (also the
quoted parent of a reply). Malformed input raises `EventFormatError`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from channels.feishu.card_text import card_text, shared_text
from gateway.bus import ChatType, MediaKind

__all__ = [
    "MESSAGE_EVENT",
    "Envelope",
    "EventFormatError",
    "MediaKey",
    "Mention",
    "ParsedMessage",
    "content_text",
    "parse_envelope",
    "parse_mentions",
    "parse_message",
]

MESSAGE_EVENT = "im.message.receive_v1"
_SPACES = re.compile(r"[ \t]{2,}")


class EventFormatError(ValueError):
    """The body is not a Feishu event we can read."""


@dataclass(frozen=True, slots=True)
class Envelope:
    event_id: str
    event_type: str
    token: str | None
    create_time: str
    event: dict[str, Any]


@dataclass(frozen=True, slots=True)
class MediaKey:
    kind: MediaKind
    key: str
    resource_type: str  # the `type` query of the resource download: image | file
    name: str | None = None


@dataclass(frozen=True, slots=True)
class Mention:
    key: str  # "@_user_1"
    open_id: str
    name: str


@dataclass(frozen=True, slots=True)
class ParsedMessage:
    message_id: str
    chat_id: str
    chat_type: ChatType
    sender_open_id: str
    sender_ids: tuple[str, ...]  # open_id, user_id, union_id (those present)
    sender_type: str
    msg_type: str
    text: str
    raw_content: str
    media: tuple[MediaKey, ...]
    mentions: tuple[Mention, ...]
    bot_mentioned: bool
    parent_id: str | None
    root_id: str | None
    thread_id: str | None
    create_time: str


def parse_envelope(body: Any) -> Envelope:
    if not isinstance(body, dict):
        raise EventFormatError("event body is not a JSON object")
    event = body.get("event")
    if not isinstance(event, dict):
        raise EventFormatError("event body has no event object")
    header = body.get("header")
    if body.get("schema") == "2.0" or isinstance(header, dict):
        if not isinstance(header, dict):
            raise EventFormatError("v2 event without header")
        event_id, event_type = header.get("event_id"), header.get("event_type")
        token, created = header.get("token"), header.get("create_time")
    else:  # v1: {"uuid", "token", "ts", "type": "event_callback", "event": {"type", ...}}
        event_id, event_type = body.get("uuid"), event.get("type")
        token, created = body.get("token"), body.get("ts")
        if event_type == "message":
            event = _v1_message_as_v2(event)
            event_type = MESSAGE_EVENT
    if not isinstance(event_id, str) or not event_id or not isinstance(event_type, str):
        raise EventFormatError("event without event_id or event_type")
    return Envelope(
        event_id=event_id,
        event_type=event_type,
        token=token if isinstance(token, str) else None,
        create_time=str(created or ""),
        event=event,
    )


def parse_message(event: dict[str, Any], bot_open_id: str | None) -> ParsedMessage:
    message = event.get("message")
    sender = event.get("sender")
    if not isinstance(message, dict) or not isinstance(sender, dict):
        raise EventFormatError("message event without message or sender")
    ids = sender.get("sender_id") or {}
    if not isinstance(ids, dict):
        raise EventFormatError("sender_id is not an object")
    open_id = str(ids.get("open_id") or "")
    sender_ids = tuple(str(ids[k]) for k in ("open_id", "user_id", "union_id") if ids.get(k))
    message_id, chat_id = message.get("message_id"), message.get("chat_id")
    if not isinstance(message_id, str) or not isinstance(chat_id, str) or not message_id:
        raise EventFormatError("message without message_id or chat_id")
    mentions = tuple(parse_mentions(message.get("mentions")))
    msg_type = str(message.get("message_type") or message.get("msg_type") or "text")
    raw = message.get("content") or "{}"
    try:
        content = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError as exc:
        raise EventFormatError("message content is not JSON") from exc
    text, media = content_text(msg_type, content, mentions, bot_open_id)
    chat_type = ChatType.DIRECT if message.get("chat_type") == "p2p" else ChatType.GROUP
    return ParsedMessage(
        message_id=message_id,
        chat_id=chat_id,
        chat_type=chat_type,
        sender_open_id=open_id,
        sender_ids=sender_ids,
        sender_type=str(sender.get("sender_type") or "user"),
        msg_type=msg_type,
        text=text,
        raw_content=raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False),
        media=media,
        mentions=mentions,
        bot_mentioned=bool(bot_open_id) and any(m.open_id == bot_open_id for m in mentions),
        parent_id=_opt(message.get("parent_id")),
        root_id=_opt(message.get("root_id")),
        thread_id=_opt(message.get("thread_id")),
        create_time=str(message.get("create_time") or ""),
    )


def content_text(
    msg_type: str,
    content: Any,
    mentions: tuple[Mention, ...] = (),
    bot_open_id: str | None = None,
) -> tuple[str, tuple[MediaKey, ...]]:
    """Render message content as text plus the media it references."""
    if not isinstance(content, dict):
        return f"[{msg_type}]", ()
    if msg_type == "text":
        return _resolve_mentions(str(content.get("text", "")), mentions, bot_open_id), ()
    if msg_type == "post":
        return _post_text(content, mentions, bot_open_id)
    if msg_type == "interactive":
        return card_text(content) or "[card]", ()
    if (shared := shared_text(msg_type, content)) is not None:
        return shared, ()
    if msg_type == "merge_forward":
        return "[merged forward]", ()  # its messages are fetched by the inbound handler
    if msg_type == "image" and content.get("image_key"):
        return "[image]", (MediaKey(MediaKind.IMAGE, str(content["image_key"]), "image"),)
    if msg_type in {"file", "audio", "media"} and content.get("file_key"):
        kind = {"file": MediaKind.FILE, "audio": MediaKind.AUDIO, "media": MediaKind.VIDEO}[
            msg_type
        ]
        name = content.get("file_name")
        key = MediaKey(kind, str(content["file_key"]), "file", str(name) if name else None)
        label = f"[{kind.value}: {name}]" if name else f"[{kind.value}]"
        return label, (key,)
    return f"[{msg_type}]", ()


def parse_mentions(raw: Any) -> list[Mention]:
    found: list[Mention] = []
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, dict) or not item.get("key"):
            continue
        ident = item.get("id")
        open_id = ident.get("open_id") if isinstance(ident, dict) else ident
        found.append(Mention(str(item["key"]), str(open_id or ""), str(item.get("name") or "")))
    return found


def _resolve_mentions(text: str, mentions: tuple[Mention, ...], bot_open_id: str | None) -> str:
    # Longest keys first so "@_user_1" does not eat the prefix of "@_user_10".
    for mention in sorted(mentions, key=lambda m: len(m.key), reverse=True):
        is_bot = bool(bot_open_id) and mention.open_id == bot_open_id
        text = text.replace(mention.key, "" if is_bot else f"@{mention.name}")
    lines = [_SPACES.sub(" ", line).strip() for line in text.split("\n")]
    return "\n".join(lines).strip()


def _post_text(
    content: dict[str, Any], mentions: tuple[Mention, ...], bot_open_id: str | None
) -> tuple[str, tuple[MediaKey, ...]]:
    body = content
    if "content" not in body:  # wrapped in a language key: {"zh_cn": {...}}
        body = next((v for v in content.values() if isinstance(v, dict) and "content" in v), {})
    lines: list[str] = []
    title = body.get("title")
    if isinstance(title, str) and title.strip():
        lines.append(title.strip())
    media: list[MediaKey] = []
    for paragraph in body.get("content") or []:
        parts: list[str] = []
        for el in paragraph if isinstance(paragraph, list) else []:
            if isinstance(el, dict):
                parts.append(_post_element(el, bot_open_id, media))
        lines.append("".join(parts))
    text = _resolve_mentions("\n".join(lines), mentions, bot_open_id)
    return text, tuple(media)


def _post_element(el: dict[str, Any], bot_open_id: str | None, media: list[MediaKey]) -> str:
    tag = el.get("tag")
    if tag in {"text", "md"}:
        return str(el.get("text", ""))
    if tag == "a":
        label, href = str(el.get("text", "")), str(el.get("href", ""))
        return f"{label} ({href})" if href and href != label else label or href
    if tag == "at":
        user = str(el.get("user_id", ""))
        if bot_open_id and user == bot_open_id:
            return ""
        if user.startswith("@_user_"):
            return user  # a placeholder: resolved (or dropped, for the bot) with the text
        return f"@{el.get('user_name') or user}"
    if tag == "img" and el.get("image_key"):
        media.append(MediaKey(MediaKind.IMAGE, str(el["image_key"]), "image"))
        return "[image]"
    if tag == "media" and el.get("file_key"):
        media.append(MediaKey(MediaKind.VIDEO, str(el["file_key"]), "file"))
        return "[video]"
    if tag == "emotion":
        return f":{el.get('emoji_type', '')}:"
    if tag == "code_block":
        return f"```{el.get('language', '')}\n{el.get('text', '')}\n```"
    if tag == "hr":
        return "---"
    return str(el.get("text", ""))


def _v1_message_as_v2(event: dict[str, Any]) -> dict[str, Any]:
    """Map the legacy v1 `message` event onto the v2 shape parse_message reads."""
    msg_type = str(event.get("msg_type") or "text")
    if msg_type == "text":
        content: dict[str, Any] = {
            "text": event.get("text_without_at_bot") or event.get("text", "")
        }
    elif msg_type == "image":
        content = {"image_key": event.get("image_key", "")}
    elif msg_type == "file":
        content = {"file_key": event.get("file_key", ""), "file_name": event.get("file_name")}
    else:
        content = {}
    return {
        "sender": {
            "sender_id": {"open_id": event.get("open_id"), "user_id": event.get("employee_id")},
            "sender_type": "user",
        },
        "message": {
            "message_id": event.get("open_message_id"),
            "chat_id": event.get("open_chat_id"),
            "chat_type": "p2p" if event.get("chat_type") == "private" else "group",
            "message_type": msg_type,
            "content": json.dumps(content, ensure_ascii=False),
            "parent_id": event.get("parent_id"),
            "create_time": str(event.get("create_time") or ""),
            "mentions": [],
        },
        "v1_is_mention": bool(event.get("is_mention")),
    }


def _opt(value: Any) -> str | None:
    return str(value) if value else None
