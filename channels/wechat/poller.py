"""The getupdates long-poll loop: messages in, cursor moved only once they are durable.

One batch at a time: every kept message is submitted to the bus (which returns
once the gateway recorded it) before the new `get_updates_buf` is persisted, so
a crash replays rather than loses. A client-side timeout is an empty success
(the old cursor stays). Errors: retry after `retry_delay_secs`, after three in
a row wait `backoff_secs`. ret −14 (session expired) pauses polling until new
credentials appear or `session_pause_secs` pass; sends are not affected, and
the cursor is kept through the pause. A message that brings a user a new
context token ends a ret -2 restriction: their parked replies may go.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import structlog

from channels.base import ChannelRuntime
from channels.wechat.api import ILinkClient, ILinkError, ILinkRetError
from channels.wechat.config import WechatConfig
from channels.wechat.contexts import ContextTokens
from channels.wechat.credentials import Credentials, CredentialWatch
from channels.wechat.inbound import ParsedMessage, ReplayGuard, parse_message
from channels.wechat.media import MediaError, MediaFetcher
from gateway.bus import BusClosed, ChatType, InboundMessage, MediaRef

__all__ = ["CURSOR_KEY", "EXPIRED_REASON", "NOT_LOGGED_IN_REASON", "UpdatePoller"]

log = structlog.get_logger("picobot.channels.wechat")

CURSOR_KEY = "get_updates_buf"
NOT_LOGGED_IN_REASON = "not logged in: run `picobot channels login wechat`"
EXPIRED_REASON = "WeChat session expired: log in again with `picobot channels login wechat`"
_MAX_FAILURES = 3
_POLL_MARGIN_SECS = 5.0


class UpdatePoller:
    def __init__(
        self,
        *,
        name: str,
        config: WechatConfig,
        runtime: ChannelRuntime,
        client: ILinkClient,
        watch: CredentialWatch,
        contexts: ContextTokens,
        media: MediaFetcher,
        set_status: Callable[[str | None], None],
        apply_credentials: Callable[[Credentials], None],
    ) -> None:
        self._name = name
        self._config = config
        self._runtime = runtime
        self._client = client
        self._watch = watch
        self._contexts = contexts
        self._media = media
        self._set_status = set_status
        self._apply = apply_credentials
        self._guard = ReplayGuard()
        self._hold_secs = config.poll_timeout_secs
        self._expired = watch.current is not None and watch.current.expired

    async def run(self) -> None:
        while True:
            try:
                await self._loop()
            except BusClosed:
                log.info("wechat poller stopped: the gateway is shutting down", channel=self._name)
                return
            except Exception as exc:  # a bug or a body we cannot read: log, pause, go on
                log.exception("wechat poller failed", channel=self._name)
                self._set_status(f"WeChat poller failed: {type(exc).__name__}; retrying")
                await asyncio.sleep(self._config.backoff_secs)

    async def _ensure_credentials(self) -> None:
        while self._watch.current is None:
            self._set_status(NOT_LOGGED_IN_REASON)
            if await self._watch.wait_for_new(None):
                self._use_new_credentials()
        if self._expired:
            self._set_status(EXPIRED_REASON)
            if await self._watch.wait_for_new(self._config.session_pause_secs):
                self._use_new_credentials()
            # else the pause is over: retry the token we have, as the plugin does

    def _use_new_credentials(self) -> None:
        creds = self._watch.current
        if creds is not None:
            self._expired = False
            self._apply(creds)
            log.info("wechat credentials loaded", channel=self._name, bot=creds.ilink_bot_id)

    async def _loop(self) -> None:
        cursor = await self._runtime.state.get(CURSOR_KEY) or ""
        failures = 0
        while True:
            await self._ensure_credentials()
            try:
                batch = await self._client.get_updates(
                    cursor, wait_secs=self._hold_secs + min(_POLL_MARGIN_SECS, self._hold_secs)
                )
            except TimeoutError:
                continue  # the long poll outlived us: an empty success, same cursor
            except ILinkRetError as exc:
                if exc.session_expired:
                    await self._session_expired()
                    continue
                failures = await self._failed(exc, failures)
                continue
            except ILinkError as exc:
                failures = await self._failed(exc, failures)
                continue
            failures = 0
            self._expired = False
            self._set_status(None)
            if batch.longpolling_timeout_ms:
                self._hold_secs = max(1.0, batch.longpolling_timeout_ms / 1000)
            for raw in batch.msgs:
                await self._record(raw)
            if batch.cursor and batch.cursor != cursor:
                cursor = batch.cursor
                await self._runtime.state.set(CURSOR_KEY, cursor)

    async def _session_expired(self) -> None:
        log.warning(
            "wechat session expired (ret -14): polling paused until a new login",
            channel=self._name,
        )
        self._expired = True
        # The file first: once the status says so, a restart also knows.
        try:
            await self._watch.mark_expired()
        except OSError as exc:
            log.warning("wechat credentials not marked expired", channel=self._name, error=str(exc))
        self._set_status(EXPIRED_REASON)

    async def _failed(self, exc: ILinkError, failures: int) -> int:
        failures += 1
        log.warning("wechat getupdates failed", channel=self._name, error=str(exc), n=failures)
        if failures >= _MAX_FAILURES:
            self._set_status(f"WeChat getupdates keeps failing: {exc}")
            await asyncio.sleep(self._config.backoff_secs)
            return 0
        await asyncio.sleep(self._config.retry_delay_secs)
        return failures

    async def _record(self, raw: dict[str, Any]) -> None:
        try:
            parsed = parse_message(raw)
        except (TypeError, ValueError, AttributeError) as exc:
            log.warning("wechat message malformed: dead-lettered", channel=self._name)
            platform_id = raw.get("message_id") if isinstance(raw, dict) else None
            await self._runtime.dead_letter(
                str(platform_id) if platform_id is not None else None,
                json.dumps(raw, default=str),
                f"malformed message: {type(exc).__name__}",
            )
            return
        if parsed is None or parsed.key in self._guard:
            return
        if parsed.group_id:
            log.info(
                "wechat group message ignored: direct chats only",
                channel=self._name,
                sender=parsed.user_id,
            )
            self._guard.add(parsed.key)
            return
        if parsed.context_token:
            # Before submit: the reply may be sent before this batch finishes.
            fresh = await self._contexts.remember(
                parsed.user_id, parsed.context_token, parsed.create_time_ms
            )
            if fresh and await self._contexts.release(parsed.user_id):
                # replies parked on ret -2 may go now, with this message's token
                self._runtime.recipient_online(parsed.user_id)
        media, notes = await self._download(parsed)
        text = "\n".join(t for t in (parsed.text, *notes) if t)
        message = InboundMessage(
            channel=self._name,
            chat_id=parsed.user_id,
            sender_id=parsed.user_id,
            text=text,
            message_id=parsed.key,
            chat_type=ChatType.DIRECT,
            media=tuple(media),
            reply_to=parsed.reply_to,
            metadata=dict(parsed.metadata),
        )
        await self._runtime.bus.submit(message)
        self._guard.add(parsed.key)

    async def _download(self, parsed: ParsedMessage) -> tuple[list[MediaRef], list[str]]:
        refs: list[MediaRef] = []
        notes: list[str] = []
        for index, item in enumerate(parsed.media_items):
            try:
                refs.append(await self._media.fetch(item, f"{parsed.key}_{index}"))
            except MediaError as exc:
                what = {2: "image", 3: "voice note", 5: "video"}.get(item.get("type") or 0, "file")
                log.warning(
                    "wechat media download failed",
                    channel=self._name,
                    kind=what,
                    error=str(exc),
                )
                notes.append(f"[{what} could not be downloaded]")
        return refs, notes
