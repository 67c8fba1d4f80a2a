"""Sending to Telegram: HTML with a plain-text retry, chat migration, error mapping.

`translate` is the one place where PTB's errors become the channel error tree:

    RetryAfter            -> RateLimited(retry_after)
    Forbidden             -> PermanentSendError   (blocked, kicked)
    BadRequest            -> PermanentSendError   (bad chat, message too long, ...)
    TimedOut/NetworkError -> TransientSendError   (also 5xx, Conflict, InvalidToken)

ChatMigrated is handled here, not raised: the new chat id is remembered (memory
and `migrated:<old id>` in the channel state) and the call is repeated there.
"""

from __future__ import annotations

import datetime as dt
import warnings
from collections.abc import Awaitable, Callable
from typing import TypeVar

import structlog
from telegram import Bot, InlineKeyboardMarkup, ReplyParameters
from telegram.constants import ChatAction, ParseMode
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Forbidden,
    RetryAfter,
    TelegramError,
)
from telegram.warnings import PTBDeprecationWarning

from channels.base import (
    ChannelError,
    PermanentSendError,
    RateLimited,
    StateStore,
    TransientSendError,
)
from channels.telegram.limits import is_photo_refusal
from channels.telegram.redaction import Redactor
from channels.telegram.render import markdown_to_html

__all__ = ["TelegramSender", "retry_after_secs", "translate"]

log = structlog.get_logger("channels.telegram")
T = TypeVar("T")
_MIGRATED_KEY = "migrated:"


def retry_after_secs(exc: RetryAfter) -> float:
    with warnings.catch_warnings():
        # PTB 22 warns on this attribute unless PTB_TIMEDELTA opts in to timedelta.
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value = exc.retry_after
    return value.total_seconds() if isinstance(value, dt.timedelta) else float(value)


def translate(exc: TelegramError, redact: Redactor) -> ChannelError:
    reason = redact(exc.message)
    if isinstance(exc, RetryAfter):
        return RateLimited("telegram flood control", retry_after_secs(exc))
    if isinstance(exc, Forbidden):
        return PermanentSendError(f"telegram refused delivery: {reason}")
    if isinstance(exc, BadRequest):
        return PermanentSendError(f"telegram rejected the message: {reason}")
    return TransientSendError(f"telegram unavailable ({type(exc).__name__}): {reason}")


def _is_parse_error(exc: BadRequest) -> bool:
    return "can't parse entities" in exc.message.lower()


def _is_not_modified(exc: BadRequest) -> bool:
    return "message is not modified" in exc.message.lower()


class TelegramSender:
    def __init__(self, bot: Bot, state: StateStore, redact: Redactor) -> None:
        self._bot = bot
        self._state = state
        self._redact = redact
        self._targets: dict[str, str] = {}  # chat id -> where it lives now

    async def target(self, chat_id: str) -> str:
        """The chat's current id (a group that became a supergroup has a new one)."""
        known = self._targets.get(chat_id)
        if known is None:
            known = await self._state.get(_MIGRATED_KEY + chat_id) or chat_id
            self._targets[chat_id] = known
        return known

    async def send_text(
        self,
        chat_id: str,
        markdown: str,
        reply_to: int | None = None,
        *,
        thread_id: int | None = None,
        markup: InlineKeyboardMarkup | None = None,
    ) -> int:
        """Send one part (≤4096 chars) rendered as HTML; returns Telegram's message id.
        `thread_id`: the forum topic it belongs in (None: the chat itself);
        `markup`: buttons under it (channels/telegram/buttons.py)."""
        return await self._call(
            chat_id, lambda target: self._send_once(target, markdown, reply_to, thread_id, markup)
        )

    async def send_plain(self, chat_id: str, text: str, *, thread_id: int | None = None) -> int:
        async def op(target: str) -> int:
            message = await self._bot.send_message(target, text, message_thread_id=thread_id)
            return message.message_id

        return await self._call(chat_id, op)

    async def edit_text(self, chat_id: str, message_id: int, markdown: str, *, html: bool) -> None:
        async def op(target: str) -> None:
            try:
                if html:
                    try:
                        await self._bot.edit_message_text(
                            markdown_to_html(markdown),
                            chat_id=target,
                            message_id=message_id,
                            parse_mode=ParseMode.HTML,
                        )
                        return
                    except BadRequest as exc:
                        if not _is_parse_error(exc):
                            raise
                        log.info("telegram rejected HTML; editing as plain text", chat_id=chat_id)
                await self._bot.edit_message_text(markdown, chat_id=target, message_id=message_id)
            except BadRequest as exc:
                if not _is_not_modified(exc):
                    raise

        await self._call(chat_id, op)

    async def send_file(
        self,
        chat_id: str,
        data: bytes,
        *,
        name: str,
        photo: bool,
        caption: str | None = None,
        thread_id: int | None = None,
    ) -> int:
        """One upload: sendPhoto (shown as a picture) or sendDocument (any file).
        A photo Telegram refuses for its dimensions or size goes as a document."""

        async def op(target: str) -> int:
            if photo:
                try:
                    sent = await self._bot.send_photo(
                        target, data, caption=caption, filename=name, message_thread_id=thread_id
                    )
                    return sent.message_id
                except BadRequest as exc:
                    if not is_photo_refusal(exc.message):
                        raise
                    log.info(
                        "telegram refused the photo; sending it as a document",
                        chat_id=chat_id,
                        reason=self._redact(exc.message),
                    )
            sent = await self._bot.send_document(
                target, data, caption=caption, filename=name, message_thread_id=thread_id
            )
            return sent.message_id

        return await self._call(chat_id, op)

    async def typing(self, chat_id: str, *, thread_id: int | None = None) -> None:
        async def op(target: str) -> None:
            await self._bot.send_chat_action(target, ChatAction.TYPING, message_thread_id=thread_id)

        await self._call(chat_id, op)

    async def _send_once(
        self,
        target: str,
        markdown: str,
        reply_to: int | None,
        thread_id: int | None,
        markup: InlineKeyboardMarkup | None = None,
    ) -> int:
        reply = (
            ReplyParameters(message_id=reply_to, allow_sending_without_reply=True)
            if reply_to is not None
            else None
        )
        try:
            message = await self._bot.send_message(
                target,
                markdown_to_html(markdown),
                parse_mode=ParseMode.HTML,
                reply_parameters=reply,
                message_thread_id=thread_id,
                reply_markup=markup,
            )
        except BadRequest as exc:
            if not _is_parse_error(exc):
                raise
            log.info("telegram rejected HTML; resending as plain text", chat_id=target)
            message = await self._bot.send_message(
                target,
                markdown,
                reply_parameters=reply,
                message_thread_id=thread_id,
                reply_markup=markup,
            )
        return message.message_id

    async def _call(self, chat_id: str, op: Callable[[str], Awaitable[T]]) -> T:
        target = await self.target(chat_id)
        try:
            try:
                return await op(target)
            except ChatMigrated as exc:
                new_target = str(exc.new_chat_id)
                log.info("telegram chat migrated", chat_id=chat_id, new_chat_id=new_target)
                self._targets[chat_id] = new_target
                await self._state.set(_MIGRATED_KEY + chat_id, new_target)
                return await op(new_target)
        except ChatMigrated as exc:
            raise PermanentSendError("telegram chat migrated twice in one send") from exc
        except TelegramError as exc:
            raise translate(exc, self._redact) from exc
