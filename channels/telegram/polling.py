"""Long polling with ack-after-durable: our own getUpdates loop.

PTB's Updater confirms updates (moves the offset) before we know they are
recorded, so we drive `Bot.get_updates` ourselves: the offset moves past an
update only after `handle` returned (the bus recorded it or knew it), and it is
persisted in the channel state before the next getUpdates call confirms it to
Telegram. A restart resumes from the persisted offset: nothing lost, and the
inbox dedups the few updates that may be seen twice after a crash.

Updates are fetched as raw JSON and decoded one by one: PTB's `get_updates`
decodes the whole batch at once, so one malformed update would fail every
update with it, again and again. An update that cannot be decoded or read is
kept as a dead letter (`ChannelRuntime.dead_letter`) and the offset moves past it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from telegram import Bot, Update
from telegram.error import Conflict, InvalidToken, RetryAfter, TelegramError

from channels.base import ChannelRuntime
from channels.telegram.outbound import retry_after_secs
from channels.telegram.redaction import Redactor
from gateway.bus import BusClosed

__all__ = ["ALLOWED_UPDATES", "OFFSET_KEY", "RawUpdatesBot", "UpdatePoller"]

log = structlog.get_logger("channels.telegram")
OFFSET_KEY = "offset"
# edits arrive too (whether they become turns is `channels.telegram.edited_messages`),
# and button presses (channels/telegram/buttons.py)
ALLOWED_UPDATES = ("message", "edited_message", "callback_query")
_MAX_BACKOFF = 60.0
_CONFIRM_SECS = 2.0
_READ_MARGIN_SECS = 10.0  # beyond the long-poll timeout before a read gives up


class RawUpdatesBot(Bot):
    """A Bot that can also fetch updates undecoded (PTB's `get_updates` decodes
    the whole batch; `do_api_request("getUpdates")` warns and is meant for
    endpoints PTB lacks). The same request object and timeouts as `get_updates`."""

    async def get_raw_updates(self, *, offset: int, poll_secs: int) -> list[Any]:
        data: dict[str, Any] = {"timeout": poll_secs, "allowed_updates": list(ALLOWED_UPDATES)}
        if offset:
            data["offset"] = offset
        result = await self._post("getUpdates", data, read_timeout=poll_secs + _READ_MARGIN_SECS)
        return result if isinstance(result, list) else []


class UpdatePoller:
    def __init__(
        self,
        bot: RawUpdatesBot,
        runtime: ChannelRuntime,
        handle: Callable[[Update], Awaitable[None]],
        *,
        timeout: int,
        set_status: Callable[[str | None], None],
        redact: Redactor,
    ) -> None:
        self._bot = bot
        self._runtime = runtime
        self._state = runtime.state
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
                updates = await self._bot.get_raw_updates(
                    offset=self._offset, poll_secs=self._timeout
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

    async def _record(self, raw: Any) -> None:
        update_id = raw.get("update_id") if isinstance(raw, dict) else None
        if not isinstance(update_id, int) or isinstance(update_id, bool):
            # no id to move past: Telegram numbers every update, so this is not one
            log.warning("telegram: getUpdates returned an entry without update_id; skipped")
            return
        try:
            update = Update.de_json(raw, self._bot)
            if update is None:
                raise ValueError("empty update")
        except Exception as exc:  # anything PTB cannot decode is the sender's fault
            await self._dead_letter(update_id, raw, f"malformed update: {type(exc).__name__}")
            return
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
        await self._advance(update_id)

    async def _dead_letter(self, update_id: int, raw: Any, reason: str) -> None:
        while True:
            try:
                await self._runtime.dead_letter(str(update_id), json.dumps(raw), reason)
                break
            except (BusClosed, asyncio.CancelledError):
                raise
            except Exception:
                log.exception("telegram dead letter not recorded; retrying", update_id=update_id)
                await asyncio.sleep(1.0)
        await self._advance(update_id)

    async def _advance(self, update_id: int) -> None:
        self._offset = max(self._offset, update_id + 1)
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
