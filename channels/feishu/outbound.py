"""Reply rendering and delivery for Feishu: card, post or text; fallbacks; idempotency keys.

A reply part goes out as an `interactive` card with one `markdown` element
(`cards: true`, the default: Feishu renders Markdown there best), else as
`post` with one `md` element when it looks like Markdown, else as `text`.
When Feishu rejects the body (a card or post it cannot render, content too
large, …) the same part is sent again as plain `text`: the last fallback, so a
reply is never lost to its formatting. A reply to a message that is gone
(withdrawn, deleted) is posted into the chat instead.

Each part's `uuid` (Feishu's idempotency key, honoured for an hour) is the
message's random idempotency key (stored with its outbox row) plus the part
index, and the plain-text fallback has a key of its own: a retried reply is
never shown twice and a new reply never looks like an old one.

Files (`OutboundMessage.media`) are uploaded (`im/v1/images` for images up to
10 MB, `im/v1/files` otherwise: channels/feishu/limits.py) and sent as `image` /
`file` messages after the text; a file over every limit becomes a text note.
The key an upload returns is stored in the channel state before the send, so
a retry, also after a crash between the two, sends that upload rather than
uploading again, under the same `uuid`.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from pathlib import Path

import structlog

from channels.base import PermanentSendError, SendResult, StateStore, split_text
from channels.feishu.api import FeishuApi, FeishuApiError
from channels.feishu.cards import approval_card
from channels.feishu.limits import SendAs, plan, too_large_note
from gateway.bus import ApprovalAsk, MediaKind, MediaRef, OutboundMessage

__all__ = ["Rendering", "idempotency_key", "receive_id_type", "render", "renderings", "send_reply"]

log = structlog.get_logger("channels.feishu.outbound")

_MARKDOWN = re.compile(
    r"(^|\n)\s{0,3}(#{1,6}\s|[-*+]\s|\d+\.\s|>\s|```)|\*\*[^*\n]+\*\*|`[^`\n]+`|\[[^\]\n]+\]\([^)\s]+\)"
)

# Feishu caps card and post content at 30 KB (text at 150 KB): bigger parts go out as text.
POST_MAX_BYTES = 28_000
CARD_MAX_BYTES = 28_000
# The message answered no longer exists: post into the chat instead.
TARGET_GONE_CODES = frozenset({230011, 231003})
_UPLOAD_KEY = "upload:"  # channel state: idempotency key and part → image_key / file_key
_STREAMED_KEY = "streamed:"  # channel state: idempotency key → the card its first part went into


@dataclass(frozen=True, slots=True)
class Rendering:
    msg_type: str
    content: str  # the JSON string Feishu wants in `content`
    key_suffix: str = ""  # distinguishes the fallback's idempotency key


def _text(text: str) -> Rendering:
    return Rendering("text", json.dumps({"text": text}, ensure_ascii=False), "-t")


def markdown_card(text: str) -> str:
    """A card showing `text` as Markdown (a shared card, so it may be updated later)."""
    card = {
        "config": {"wide_screen_mode": True, "update_multi": True},
        "elements": [{"tag": "markdown", "content": text}],
    }
    return json.dumps(card, ensure_ascii=False)


def render(text: str) -> tuple[str, str]:
    """(msg_type, content JSON string) for one part without cards: post or text."""
    if "\n\n" in text.strip() or _MARKDOWN.search(text):
        post = {"zh_cn": {"title": "", "content": [[{"tag": "md", "text": text}]]}}
        content = json.dumps(post, ensure_ascii=False)
        if len(content.encode()) <= POST_MAX_BYTES:
            return "post", content
    return "text", json.dumps({"text": text}, ensure_ascii=False)


def renderings(text: str, *, cards: bool) -> list[Rendering]:
    """What to try for one part, in order; plain text is always the last."""
    if cards:
        content = markdown_card(text)
        if len(content.encode()) <= CARD_MAX_BYTES:
            return [Rendering("interactive", content), _text(text)]
        return [_text(text)]
    msg_type, content = render(text)
    if msg_type == "text":
        return [_text(text)]
    return [Rendering(msg_type, content), _text(text)]


def idempotency_key(message_key: str, part: int) -> str:
    """Feishu's `uuid` for one part (at most 50 characters)."""
    return f"pb-{message_key[:40]}-{part}"


def receive_id_type(chat_id: str) -> str:
    """Chats are oc_…; a scheduler may also address a user by open_id (ou_…)."""
    if chat_id.startswith("ou_"):
        return "open_id"
    if chat_id.startswith("on_"):
        return "union_id"
    return "chat_id"


class _Delivery:
    """One reply's parts, in order; `target` is dropped once it is known gone."""

    def __init__(
        self, api: FeishuApi, message: OutboundMessage, target: str | None, in_thread: bool
    ) -> None:
        self.api = api
        self.message = message
        self.target = target
        self.in_thread = in_thread

    async def part(self, index: int, text: str, cards: bool, ask: ApprovalAsk | None = None) -> str:
        options = renderings(text, cards=cards)
        if ask is not None:  # with Approve / Deny buttons; the text names the commands too
            options = [Rendering("interactive", approval_card(text, ask)), _text(text)]
        for n, rendering in enumerate(options):
            last = n == len(options) - 1
            key = idempotency_key(self.message.idempotency_key, index) + rendering.key_suffix
            try:
                return await self._post(rendering, key, last)
            except FeishuApiError as exc:
                if last:
                    raise
                log.warning(
                    "feishu: body rejected, sending as plain text",
                    code=exc.code,
                    msg_type=rendering.msg_type,
                )
        raise AssertionError("unreachable: the last rendering returns or raises")

    async def _post(self, rendering: Rendering, key: str, last: bool) -> str:
        if self.target is not None:
            try:
                return await self.api.reply_message(
                    self.target,
                    rendering.msg_type,
                    rendering.content,
                    key,
                    reply_in_thread=self.in_thread,
                )
            except FeishuApiError as exc:
                if exc.code not in TARGET_GONE_CODES and not last:
                    raise  # the body, not the target: the next rendering
                # gone (or even plain text refused as a reply): into the chat instead
                log.warning("feishu: reply failed, sending to the chat", code=exc.code)
                self.target = None
        chat_id = self.message.chat_id
        return await self.api.send_message(
            chat_id, rendering.msg_type, rendering.content, key, id_type=receive_id_type(chat_id)
        )

    async def media(self, index: int, media: MediaRef, state: StateStore) -> str:
        """Upload (once: the key is kept in the channel state before the send, so
        a retry after a crash sends what was uploaded) and send one file; a file
        over every limit (channels/feishu/limits.py) becomes a note instead."""
        slot = f"{_UPLOAD_KEY}{self.message.idempotency_key}:{index}"
        stored = await state.get(slot)
        if stored:
            msg_type, _, file_key = stored.rpartition(":")
            # a key stored before the type was (an image went to im/v1/images then)
            msg_type = msg_type or ("image" if media.kind is MediaKind.IMAGE else "file")
        else:
            try:
                data = await asyncio.to_thread(Path(media.path).read_bytes)
            except OSError as exc:
                raise PermanentSendError(f"the file to send is gone: {exc.strerror}") from None
            name = media.name or Path(media.path).name
            send_as = plan(media.kind, len(data))
            if send_as is SendAs.NOTHING:
                log.info("feishu: file not sent, too large", size=len(data))
                return await self.part(index, too_large_note(name, len(data)), cards=False)
            msg_type = send_as.value
            upload = self.api.upload_image if send_as is SendAs.IMAGE else self.api.upload_file
            file_key = await upload(data, name)
            await state.set(slot, f"{msg_type}:{file_key}")
        content = {"image_key": file_key} if msg_type == "image" else {"file_key": file_key}
        rendering = Rendering(msg_type, json.dumps(content))
        key = idempotency_key(self.message.idempotency_key, index)
        return await self._post(rendering, key, last=True)


async def _streamed_part(
    api: FeishuApi,
    message: OutboundMessage,
    part: str,
    card_id: str | None,
    state: StateStore | None,
) -> str | None:
    """The first part put into the streamed card: its id, or None to send it as
    usual. Recorded in the state, so a retry of the row does not post it again."""
    if state is None:
        return None
    slot = f"{_STREAMED_KEY}{message.idempotency_key}"
    done = await state.get(slot)
    if done:
        return done
    if card_id is None:
        return None
    content = markdown_card(part)
    if len(content.encode()) > CARD_MAX_BYTES:
        return None
    try:
        await api.patch_message(card_id, content)
    except FeishuApiError as exc:
        log.info("feishu: streamed card not updated; sending the reply", code=exc.code)
        return None
    await state.set(slot, card_id)
    return card_id


async def send_reply(
    api: FeishuApi,
    message: OutboundMessage,
    target: str | None,
    limit: int,
    *,
    cards: bool = True,
    reply_in_thread: bool = False,
    state: StateStore | None = None,
    streaming: bool = False,
    stream_card: str | None = None,
) -> SendResult:
    """Send every part in order: as replies to `target` if given, else into the
    chat; then each file of `message.media` (which needs `state`). When
    `streaming`, the first part goes into `stream_card` (the card that showed
    this reply as it was generated) instead of a new message."""
    delivery = _Delivery(api, message, target, reply_in_thread)
    parts = split_text(message.text, limit) if message.text.strip() else []
    ask = ApprovalAsk.of(message)  # its buttons go on the last part (channels/feishu/cards.py)
    ids: list[str] = []
    for index, part in enumerate(parts):
        streamed = None
        if streaming and index == 0 and ask is None:
            streamed = await _streamed_part(api, message, part, stream_card, state)
        last_ask = ask if index == len(parts) - 1 else None
        ids.append(streamed or await delivery.part(index, part, cards, last_ask))
    for index, media in enumerate(message.media, start=len(parts)):
        if state is None:
            raise PermanentSendError("feishu: files need the channel state")
        ids.append(await delivery.media(index, media, state))
    return SendResult(platform_message_ids=tuple(ids))
