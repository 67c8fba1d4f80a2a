"""Turn a Telegram `Update` into the facts the channel needs to build an InboundMessage.

Pure functions over PTB objects: which chat and sender, the text without the
bot's own @mention, the quoted text, the attachments to download, and whether a
group message addresses the bot (mention, reply to the bot, or a command for it).
No I/O here: downloading is `media.py`'s job, filtering and submitting the channel's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from telegram import Message, MessageEntity, Update

from gateway.bus import ChatType, MediaKind

__all__ = ["Attachment", "BotIdentity", "ParsedMessage", "parse_update", "sender_ids"]

_VISION_MIME = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
_ENTITY_TYPES: list[str | None] = [
    MessageEntity.MENTION,
    MessageEntity.TEXT_MENTION,
    MessageEntity.BOT_COMMAND,
]


@dataclass(frozen=True, slots=True)
class BotIdentity:
    id: int
    username: str  # without "@", as Telegram spells it

    @property
    def handle(self) -> str:
        return f"@{self.username}".lower()


@dataclass(frozen=True, slots=True)
class Attachment:
    kind: MediaKind
    file_id: str
    file_unique_id: str
    file_size: int | None
    mime_type: str | None
    name: str | None
    label: str  # what it is, for notes to the agent ("photo", "voice message", ...)


@dataclass(frozen=True, slots=True)
class ParsedMessage:
    chat_id: str
    chat_type: ChatType
    sender_id: str
    sender_ids: tuple[str, ...]  # numeric id and "@username", for allow_from
    message_id: str  # "<chat_id>:<message_id>": Telegram ids are only unique per chat
    telegram_message_id: int
    text: str
    addressed: bool  # private chat, or a group message aimed at the bot
    reply_to: str | None
    mentions: tuple[str, ...]
    attachments: tuple[Attachment, ...]
    metadata: dict[str, Any] = field(default_factory=dict)
    thread_id: int | None = None  # forum topic (replies must go back there)
    language: str | None = None  # from.language_code: "zh-hans", "en"


def sender_ids(user_id: int, username: str | None) -> tuple[str, ...]:
    ids = [str(user_id)]
    if username:
        ids.append(f"@{username.lower()}")
    return tuple(ids)


def parse_update(update: Update, me: BotIdentity, *, edits: bool = False) -> ParsedMessage | None:
    """The message in `update`, or None when it is nothing we answer (service
    messages, bots; edits unless `edits`). An edit is a message of its own,
    marked "[edited]", keyed by its edit time so each edit is answered once."""
    message = update.message
    edit_date = None
    if message is None and edits and update.edited_message is not None:
        message = update.edited_message
        edit_date = message.edit_date
    if message is None:
        return None
    user = message.from_user
    if user is None or user.is_bot:
        return None
    if message.chat.type == "private":
        chat_type = ChatType.DIRECT
    elif message.chat.type in ("group", "supergroup"):
        chat_type = ChatType.GROUP
    else:
        return None

    raw_text = message.text if message.text is not None else (message.caption or "")
    mentions, to_me = _mentions(message, me)
    attachments = _attachments(message)
    if not raw_text.strip() and not attachments:
        return None
    replied_to_me = (
        message.reply_to_message is not None
        and message.reply_to_message.from_user is not None
        and message.reply_to_message.from_user.id == me.id
    )
    addressed = chat_type is ChatType.DIRECT or to_me or replied_to_me
    chat_id = str(message.chat.id)
    metadata: dict[str, Any] = {
        "update_id": update.update_id,
        "telegram_message_id": message.message_id,
        "first_name": user.first_name,
    }
    if user.username:
        metadata["username"] = user.username
    if message.chat.title:
        metadata["chat_title"] = message.chat.title
    # only a forum topic's thread id may be sent back (reply threads of ordinary
    # groups carry one too, which sendMessage would refuse)
    thread_id = message.message_thread_id if message.is_topic_message else None
    if thread_id is not None:
        metadata["message_thread_id"] = thread_id
    return ParsedMessage(
        chat_id=chat_id,
        chat_type=chat_type,
        sender_id=str(user.id),
        sender_ids=sender_ids(user.id, user.username),
        message_id=(
            f"{chat_id}:{message.message_id}"
            if edit_date is None
            else f"{chat_id}:{message.message_id}:edit:{int(edit_date.timestamp())}"
        ),
        telegram_message_id=message.message_id,
        text=("[edited] " if edit_date is not None else "") + _strip_own_handle(raw_text, me),
        addressed=addressed,
        reply_to=_quoted(message),
        mentions=mentions,
        attachments=attachments,
        metadata=metadata,
        thread_id=thread_id,
        language=user.language_code,
    )


def _mentions(message: Message, me: BotIdentity) -> tuple[tuple[str, ...], bool]:
    """Mentioned handles, and whether the bot itself is mentioned or commanded."""
    if message.text is not None:
        entities = message.parse_entities(_ENTITY_TYPES)
    else:
        entities = message.parse_caption_entities(_ENTITY_TYPES)
    found: list[str] = []
    to_me = False
    for entity, text in entities.items():
        if entity.type == MessageEntity.MENTION:
            found.append(text)
            to_me = to_me or text.lower() == me.handle
        elif entity.type == MessageEntity.TEXT_MENTION and entity.user is not None:
            found.append(str(entity.user.id))
            to_me = to_me or entity.user.id == me.id
        elif entity.type == MessageEntity.BOT_COMMAND and entity.offset == 0:
            # "/cmd" is for every bot in the group; "/cmd@name" only for that bot.
            _, _, target = text.partition("@")
            to_me = to_me or not target or f"@{target}".lower() == me.handle
    return tuple(found), to_me


def _strip_own_handle(text: str, me: BotIdentity) -> str:
    """Drop "@bot" from the text (also from "/cmd@bot"), so the agent and /commands see it clean."""
    handle = re.escape(me.handle)
    cleaned = re.sub(rf"^(/\w+){handle}\b", r"\1", text, flags=re.IGNORECASE)
    cleaned = re.sub(rf"(?<![\w@]){handle}\b", "", cleaned, flags=re.IGNORECASE)
    return re.sub(r"[ \t]{2,}", " ", cleaned).strip()


def _quoted(message: Message) -> str | None:
    if message.quote is not None and message.quote.text:
        return message.quote.text
    replied = message.reply_to_message
    if replied is None:
        return None
    if replied.text:
        return replied.text
    if replied.caption:
        return replied.caption
    return "[media message]"


def _attachments(message: Message) -> tuple[Attachment, ...]:
    found: list[Attachment] = []
    if message.photo:
        largest = max(message.photo, key=lambda p: (p.width * p.height, p.file_size or 0))
        found.append(
            Attachment(
                MediaKind.IMAGE,
                largest.file_id,
                largest.file_unique_id,
                largest.file_size,
                "image/jpeg",
                None,
                "photo",
            )
        )
    if message.document is not None:
        doc = message.document
        kind = MediaKind.IMAGE if doc.mime_type in _VISION_MIME else MediaKind.FILE
        found.append(
            Attachment(
                kind,
                doc.file_id,
                doc.file_unique_id,
                doc.file_size,
                doc.mime_type,
                doc.file_name,
                "file",
            )
        )
    if message.voice is not None:
        v = message.voice
        mime = v.mime_type or "audio/ogg"
        found.append(
            Attachment(
                MediaKind.AUDIO,
                v.file_id,
                v.file_unique_id,
                v.file_size,
                mime,
                None,
                "voice message",
            )
        )
    if message.audio is not None:
        a = message.audio
        found.append(
            Attachment(
                MediaKind.AUDIO,
                a.file_id,
                a.file_unique_id,
                a.file_size,
                a.mime_type,
                a.file_name,
                "audio",
            )
        )
    if message.video is not None:
        vd = message.video
        found.append(
            Attachment(
                MediaKind.VIDEO,
                vd.file_id,
                vd.file_unique_id,
                vd.file_size,
                vd.mime_type or "video/mp4",
                vd.file_name,
                "video",
            )
        )
    return tuple(found)
