"""Reply rendering and delivery for Feishu: text vs post, idempotency keys, reply targets.

Plain one-paragraph replies go out as `text`; multi-paragraph or Markdown-like
replies as `post` with one `md` element, which Feishu renders. Each part's
`uuid` (Feishu's idempotency key, honoured for an hour) is derived from the
outbox id and the part index, so a retried reply is never shown twice.
"""

from __future__ import annotations

import json
import re
import uuid as uuidlib

import structlog

from channels.base import SendResult, split_text
from channels.feishu.api import FeishuApi, FeishuApiError
from channels.feishu.cards import approval_card
from gateway.bus import ApprovalAsk, OutboundMessage

__all__ = ["idempotency_key", "receive_id_type", "render", "send_reply"]

log = structlog.get_logger("channels.feishu.outbound")

_MARKDOWN = re.compile(
    r"(^|\n)\s{0,3}(#{1,6}\s|[-*+]\s|\d+\.\s|>\s|```)|\*\*[^*\n]+\*\*|`[^`\n]+`|\[[^\]\n]+\]\([^)\s]+\)"
)


# Feishu caps post content at 30 KB (text at 150 KB): bigger parts go out as text.
POST_MAX_BYTES = 28_000


def render(text: str) -> tuple[str, str]:
    """(msg_type, content JSON string) for one part of a reply."""
    if "\n\n" in text.strip() or _MARKDOWN.search(text):
        post = {"zh_cn": {"title": "", "content": [[{"tag": "md", "text": text}]]}}
        content = json.dumps(post, ensure_ascii=False)
        if len(content.encode()) <= POST_MAX_BYTES:
            return "post", content
    return "text", json.dumps({"text": text}, ensure_ascii=False)


def idempotency_key(outbox_id: int | None, part: int) -> str:
    if outbox_id is None:
        return uuidlib.uuid4().hex
    return f"picobot-{outbox_id}-{part}"


def receive_id_type(chat_id: str) -> str:
    """Chats are oc_…; a scheduler may also address a user by open_id (ou_…)."""
    if chat_id.startswith("ou_"):
        return "open_id"
    if chat_id.startswith("on_"):
        return "union_id"
    return "chat_id"


async def send_reply(
    api: FeishuApi, message: OutboundMessage, target: str | None, limit: int
) -> SendResult:
    """Send every part in order: as replies to `target` if given, else into the chat."""
    ids: list[str] = []
    ask = ApprovalAsk.of(message)  # its buttons go on the last part (channels/feishu/cards.py)
    parts = split_text(message.text, limit)
    for index, part in enumerate(parts):
        msg_type, content = render(part)
        if ask is not None and index == len(parts) - 1:
            msg_type, content = "interactive", approval_card(part, ask)
        key = idempotency_key(message.outbox_id, index)
        if target is not None:
            try:
                ids.append(await api.reply_message(target, msg_type, content, key))
                continue
            except FeishuApiError as exc:
                # The message answered may be withdrawn or gone: post into the chat instead.
                log.warning("feishu: reply failed, sending to the chat", code=exc.code)
                target = None
        ids.append(
            await api.send_message(
                message.chat_id, msg_type, content, key, id_type=receive_id_type(message.chat_id)
            )
        )
    return SendResult(platform_message_ids=tuple(ids))
