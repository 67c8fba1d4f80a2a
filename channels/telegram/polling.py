"""Long polling with ack-after-durable: our own getUpdates loop.

PTB's Updater confirms updates (moves the offset) before we know they are
recorded, so we drive `Bot.get_updates` ourselves: the offset moves past an
update only after `handle` returned (the bus recorded it or knew it), and it is
persisted in the channel state before the next getUpdates call confirms it to
Telegram. A restart resumes from the persisted offset: nothing lost, and the
inbox dedups the few updates that may be seen twice after a crash.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog
from telegram import Bot, Update
from telegram.error import Conflict, InvalidToken, RetryAfter, TelegramError

from channels.base import StateStore
from channels.telegram.outbound import retry_after_secs
from channels.telegram.redaction import Redactor
from gateway.bus import BusClosed

__all__ = ["ALLOWED_UPDATES", "OFFSET_KEY", "UpdatePoller"]

log = structlog.get_logger("channels.telegram")
OFFSET_KEY = "offset"
ALLOWED_UPDATES = ("message",)
_MAX_BACKOFF = 60.0
_CONFIRM_SECS = 2.0


class UpdatePoller:
    def __init__(
        self,
        bot: Bot,
        state: StateStore,
        handle: Callable[[Update], Awaitable[None]],
        *,
        timeout: int,
        set_status: Callable[[str | None], None],
        redact: Redactor,
    ) -> None:
        self._bot = bot
        self._state = state
        self._handle = handle
        self._timeout = timeout
        self._set_status = set_status
        self._redact = redact
        self._offset = 0  # next update_id we want; everything below is recorded
        self._confirmed = 0  # highest offset Telegram has seen from us

    async def run(self) -> None:
        """Poll until cancelled or the bus closes."""
        self._offset = int(await self._state.get(OFFSET_KEY) or 0)
        backoff = 1.0
        while True:
            try:
                updates = await self._bot.get_updates(
                    offset=self._offset or None,
                    timeout=self._timeout,
                    allowed_updates=ALLOWED_UPDATES,
                )
            except RetryAfter as exc:
                await asyncio.sleep(retry_after_secs(exc))
                continue
            except TelegramError as exc:
                self._set_status(self._reason(exc))
                log.warning(
                    "telegram getUpdates failed", error=type(exc).__name__, retry_in=backoff
                )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF)
                continue
            self._confirmed = max(self._confirmed, self._offset)
            self._set_status(None)
            backoff = 1.0
            try:
                for update in updates:
                    await self._record(update)
            except BusClosed:
                log.debug("telegram polling ends: the gateway stopped taking messages")
                return

    async def _record(self, update: Update) -> None:
        while True:
            try:
                await self._handle(update)
                break
            except (BusClosed, asyncio.CancelledError):
                raise
            except Exception:
                # Not acknowledged: try the same update again rather than lose it.
                log.exception("telegram update not recorded; retrying", update_id=update.update_id)
                await asyncio.sleep(1.0)
        self._offset = update.update_id + 1
        await self._state.set(OFFSET_KEY, str(self._offset))

    async def confirm(self) -> None:
        """Tell Telegram about recorded updates (one getUpdates with timeout=0); best effort."""
        if self._offset <= self._confirmed:
            return
        try:
            async with asyncio.timeout(_CONFIRM_SECS):
                await self._bot.get_updates(
                    offset=self._offset, timeout=0, limit=1, allowed_updates=ALLOWED_UPDATES
                )
            self._confirmed = self._offset
        except (TelegramError, TimeoutError) as exc:
            log.debug("telegram final confirm failed", error=type(exc).__name__)

    def _reason(self, exc: TelegramError) -> str:
        if isinstance(exc, InvalidToken):
            return "telegram rejected the bot token"
        if isinstance(exc, Conflict):
            return "telegram conflict: another poller or a webhook is using this bot"
        return f"telegram unreachable: {type(exc).__name__}: {self._redact(exc.message)}"
