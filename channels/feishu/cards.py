"""Approve / Deny on Feishu: an approval request goes out as a card with two
buttons, and a press (`card.action.trigger`, by long connection or webhook,
in the same v2 envelope as messages) comes back as the command text it
stands for.

A press is an inbound message like a typed `/approve 3`, keyed by its
event id (a redelivered press is a duplicate): the gateway's access policy
and approval rules decide whether it is taken, never this module. The card's
button `value` carries only what we sent: the command and whether the chat is
a group (the callback does not say; the access policy judges groups apart).
"""

from __future__ import annotations

import json
from typing import Any

from channels.feishu.parse import Envelope
from gateway.bus import (
    ApprovalAsk,
    ChatType,
    Decision,
    InboundMessage,
    button_command,
    parse_button,
)

__all__ = ["CARD_ACTION_EVENT", "approval_card", "card_press"]

CARD_ACTION_EVENT = "card.action.trigger"
_VALUE_KEY = "picobot"


def _button(label: str, kind: str, command: str, group: bool) -> dict[str, Any]:
    return {
        "tag": "button",
        "text": {"tag": "plain_text", "content": label},
        "type": kind,
        "value": {_VALUE_KEY: command, "group": group},
    }


def approval_card(text: str, ask: ApprovalAsk) -> str:
    """The card JSON (content of an `interactive` message): `text` as is, then
    the two buttons."""
    approve = button_command(Decision.APPROVE, ask.approval_id)
    deny = button_command(Decision.DENY, ask.approval_id)
    body = {
        "config": {"wide_screen_mode": True},
        "elements": [
            {"tag": "div", "text": {"tag": "plain_text", "content": text}},
            {
                "tag": "action",
                "actions": [
                    _button(ask.approve_label, "primary", approve, ask.group),
                    _button(ask.deny_label, "danger", deny, ask.group),
                ],
            },
        ],
    }
    return json.dumps(body, ensure_ascii=False)


def card_press(envelope: Envelope, channel: str) -> InboundMessage | None:
    """The press in a `card.action.trigger` event as a message; None when it
    is no press of ours (another card, a malformed event)."""
    event = envelope.event
    action, operator, context = (event.get(k) for k in ("action", "operator", "context"))
    if not (isinstance(action, dict) and isinstance(operator, dict) and isinstance(context, dict)):
        return None
    value = action.get("value")
    command = value.get(_VALUE_KEY) if isinstance(value, dict) else None
    text = parse_button(command) if isinstance(command, str) else None
    chat_id, open_id = context.get("open_chat_id"), operator.get("open_id")
    if text is None or not isinstance(chat_id, str) or not isinstance(open_id, str):
        return None
    group = isinstance(value, dict) and value.get("group") is True
    aliases = tuple(
        str(operator[k]) for k in ("user_id", "union_id") if isinstance(operator.get(k), str)
    )
    card_id = context.get("open_message_id")
    return InboundMessage(
        channel=channel,
        chat_id=chat_id,
        sender_id=open_id,
        text=text,
        message_id=envelope.event_id,
        reply_ref=card_id if isinstance(card_id, str) else None,
        chat_type=ChatType.GROUP if group else ChatType.DIRECT,
        sender_aliases=aliases,
        addressed=True,  # a press on the bot's own card is aimed at the bot
        metadata={"event_id": envelope.event_id, "msg_type": "card_action"},
    )
