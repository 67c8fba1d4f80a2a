"""Approve / Deny buttons on Telegram: an inline keyboard on the request, and
the `callback_query` a press sends back as the command text it stands for.

A press is an inbound message like a typed `/approve 3` (its id is the
callback query's, so a redelivered update is a duplicate): the gateway's
access policy and approval rules decide whether it is taken, never this
module. The query is answered (`answerCallbackQuery`) once the press is
recorded, so the button stops spinning; failing that is only cosmetic.
"""

from __future__ import annotations

import structlog
from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup, Update
from telegram.error import TelegramError

from channels.telegram.inbound import sender_ids
from gateway.bus import (
    ApprovalAsk,
    ChatType,
    Decision,
    InboundMessage,
    OutboundMessage,
    button_command,
    parse_button,
)

__all__ = ["answer_press", "approval_keyboard", "button_press"]

log = structlog.get_logger("channels.telegram")


def approval_keyboard(message: OutboundMessage) -> InlineKeyboardMarkup | None:
    """Approve / Deny under an approval request; None for any other message."""
    ask = ApprovalAsk.of(message)
    if ask is None:
        return None
    approve = button_command(Decision.APPROVE, ask.approval_id)
    deny = button_command(Decision.DENY, ask.approval_id)
    return InlineKeyboardMarkup(
        [
            [
                InlineKeyboardButton(f"✅ {ask.approve_label}", callback_data=approve),
                InlineKeyboardButton(f"❌ {ask.deny_label}", callback_data=deny),
            ]
        ]
    )


def button_press(update: Update, channel: str) -> InboundMessage | None:
    """The press in `update` as a message, or None when it is no press of ours."""
    query = update.callback_query
    if query is None or query.message is None:
        return None
    text = parse_button(query.data or "")
    user = query.from_user
    chat = query.message.chat
    if text is None or user.is_bot or chat.type not in ("private", "group", "supergroup"):
        return None
    chat_id = str(chat.id)
    ids = sender_ids(user.id, user.username)
    return InboundMessage(
        channel=channel,
        chat_id=chat_id,
        sender_id=ids[0],
        text=text,
        message_id=f"{chat_id}:callback:{query.id}",
        chat_type=ChatType.DIRECT if chat.type == "private" else ChatType.GROUP,
        metadata={"update_id": update.update_id, "first_name": user.first_name},
        sender_aliases=ids[1:],
        addressed=True,  # a press on the bot's own message is aimed at the bot
    )


async def answer_press(bot: Bot, update: Update) -> None:
    query = update.callback_query
    if query is None:
        return
    try:
        await bot.answer_callback_query(query.id)
    except TelegramError as exc:
        log.info("telegram callback query not answered", error=type(exc).__name__)
