"""A turn's tool calls in one Feishu card, updated in place.

Feishu edits only cards: the progress is an `interactive` message whose card
is a shared one (`config.update_multi`), so `PATCH /im/v1/messages/{id}` may
replace it (Feishu allows 5 updates a second per message; `channels.progress`
sends at most one a second). The card answers the user's message when it is
known, like the reply; its idempotency key is the turn's run id, so a retried
post never shows two cards.
"""

from __future__ import annotations

import json

from channels.feishu.api import FeishuApi, FeishuApiError
from channels.feishu.inbound import MessageIdMap
from channels.feishu.outbound import receive_id_type
from channels.progress import LiveProgress
from gateway.bus import ChannelEvent

__all__ = ["card", "tool_progress"]


def card(text: str) -> str:
    """The card JSON (content of an `interactive` message) showing `text` as is."""
    body = {
        "config": {"update_multi": True, "wide_screen_mode": True},
        "elements": [{"tag": "div", "text": {"tag": "plain_text", "content": text}}],
    }
    return json.dumps(body, ensure_ascii=False)


def tool_progress(api: FeishuApi, ids: MessageIdMap, interval: float) -> LiveProgress:
    async def post(event: ChannelEvent, text: str) -> str:
        key = f"picobot-tools-{event.run_id}"
        target = ids.resolve(event.reply_to_message_id)
        if target is not None:
            try:
                return await api.reply_message(target, "interactive", card(text), key)
            except FeishuApiError:
                pass  # the message answered may be gone: post into the chat instead
        id_type = receive_id_type(event.chat_id)
        return await api.send_message(
            event.chat_id, "interactive", card(text), key, id_type=id_type
        )

    async def edit(event: ChannelEvent, handle: str, text: str) -> None:
        await api.patch_message(handle, card(text))

    return LiveProgress(post, edit, min_interval=interval, name="feishu-tool-progress")
