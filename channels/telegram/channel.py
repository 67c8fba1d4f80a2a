"""The Telegram channel: lifecycle, inbound filtering and submission, sending.

Receives updates by long polling (`polling.py`, our own getUpdates loop so the
offset only moves after the bus recorded an update) or by webhook on the
gateway's HTTP app (`/webhooks/telegram`, secret token checked, answered 200
only after the update is recorded). Every message is submitted with whether
it addresses the bot and the sender's ids; who and which groups are served is
the gateway's access policy (gateway.access.policy), not this adapter's. Replies are split at 4096 chars, rendered as HTML and sent in
order; a reply that fails half way resumes after the parts already delivered
(each part is recorded before the next goes, so even a SIGKILL repeats at most
the part in flight: Telegram has no idempotency key).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
from pathlib import Path

import structlog
from aiohttp import web
from telegram import Update
from telegram.error import InvalidToken, TelegramError
from telegram.request import HTTPXRequest

from channels.base import (
    Capabilities,
    Channel,
    ChannelRuntime,
    PermanentSendError,
    SendResult,
    TransientSendError,
    split_text,
)
from channels.progress import LiveProgress
from channels.stream_preview import PreviewStreams
from channels.tasks import cancel_and_wait
from channels.telegram.buttons import answer_press, approval_keyboard, button_press
from channels.telegram.config import WEBHOOK_PATH, TelegramConfig, TelegramMode
from channels.telegram.inbound import BotIdentity, ParsedMessage, parse_update
from channels.telegram.limits import SendAs, image_size, plan, preview, too_large_note
from channels.telegram.live import TypingLoops, live_streams, tool_progress
from channels.telegram.media import MediaFetcher
from channels.telegram.outbound import TelegramSender
from channels.telegram.parts import PartProgress
from channels.telegram.polling import ALLOWED_UPDATES, RawUpdatesBot, UpdatePoller
from channels.telegram.redaction import Redactor
from channels.telegram.threads import make_handle, parse_handle
from gateway.bus import (
    BusClosed,
    ChannelEvent,
    EventKind,
    InboundMessage,
    MediaKind,
    MediaRef,
    OutboundMessage,
)

__all__ = ["TelegramChannel"]

log = structlog.get_logger("channels.telegram")
TEXT_LIMIT = 4096
CAPTION_LIMIT = 1024
HEADER_BYTES = 256 * 1024  # enough for a PNG IHDR, and a JPEG SOF behind most EXIF blocks
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
_MAX_BACKOFF = 60.0


class TelegramChannel(Channel):
    name = "telegram"
    # Telegram shows "typing" for ≤5 s; streamed edits are throttled to stay under flood limits.
    typing_interval_secs = 4.0
    stream_interval_secs = 1.0
    progress_interval_secs = 1.0  # edits of a turn's tool-progress message

    def __init__(self, config: TelegramConfig) -> None:
        super().__init__()
        self.config = config
        # one getUpdates poller per bot: a second one gets 409 (docs/scale-out.md)
        self.exclusive_connection = config.mode is TelegramMode.POLLING
        self.capabilities = Capabilities(
            max_message_chars=TEXT_LIMIT,
            can_edit=True,
            can_stream=config.streaming,
            can_show_typing=True,
            media_kinds=frozenset(MediaKind),
            send_media=frozenset(MediaKind),  # photos as photos, anything else as a document
        )
        self._token = config.token.get_secret_value()
        self._secret = config.secret_token.get_secret_value() if config.secret_token else ""
        self._redact = Redactor(self._token, self._secret)
        self._runtime: ChannelRuntime | None = None
        self._bot: RawUpdatesBot | None = None
        self._me: BotIdentity | None = None
        self._sender: TelegramSender | None = None
        self._media: MediaFetcher | None = None
        self._typing: TypingLoops | None = None
        self._streams: PreviewStreams[int | None, int] | None = None
        self._tool_progress: LiveProgress | None = None
        self._poller: UpdatePoller | None = None
        self._task: asyncio.Task[None] | None = None
        self._parts: PartProgress | None = None  # parts of a reply delivered so far

    # -- lifecycle ---------------------------------------------------------------------------

    def setup(self, runtime: ChannelRuntime) -> None:
        self._runtime = runtime
        if self.config.mode is TelegramMode.WEBHOOK:
            runtime.http.add_route("POST", WEBHOOK_PATH, self._on_webhook)

    async def start(self) -> None:
        if self._task is not None:
            raise RuntimeError("telegram channel already started")
        runtime = self._require_runtime()
        self._redact.install()
        api = self.config.api_root
        bot = RawUpdatesBot(
            self._token,
            base_url=f"{api}/bot",
            base_file_url=f"{api}/file/bot",
            request=HTTPXRequest(connection_pool_size=16, read_timeout=30.0, connect_timeout=10.0),
            get_updates_request=HTTPXRequest(connection_pool_size=2, connect_timeout=10.0),
        )
        self._bot = bot
        self._sender = sender = TelegramSender(bot, runtime.state, self._redact)
        self._parts = PartProgress(runtime.state)
        self._media = MediaFetcher(
            bot,
            runtime.media_dir / "telegram",
            self.config.max_media_bytes,
            self._redact,
            deadline_secs=self.config.download_timeout_secs,
        )
        self._typing = TypingLoops(sender, self.typing_interval_secs)
        self._streams = live_streams(sender, self.stream_interval_secs)
        self._tool_progress = tool_progress(sender, self.progress_interval_secs)
        first_attempt = asyncio.Event()
        self._task = asyncio.create_task(self._run(first_attempt), name="telegram-channel")
        waiter = asyncio.create_task(first_attempt.wait(), name="telegram-start-wait")
        try:
            await asyncio.wait({self._task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await cancel_and_wait(waiter)
        if self._task.done() and not self._task.cancelled():
            self._task.result()  # surface an unexpected crash of the connect loop

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)
        if self._typing is not None:
            await self._typing.close()
        if self._streams is not None:
            await self._streams.close()
        if self._tool_progress is not None:
            await self._tool_progress.close()
        if self._poller is not None:
            await self._poller.confirm()
        if self._media is not None:
            await self._media.aclose()
        if self._bot is not None:
            with contextlib.suppress(TelegramError):
                await self._bot.shutdown()
        self._redact.uninstall()
        self.not_ready_reason = "stopped"

    async def _run(self, first_attempt: asyncio.Event) -> None:
        """Connect (retrying with backoff), then poll; a crash is logged and retried."""
        backoff = 1.0
        while True:
            try:
                await self._connect()
                self.not_ready_reason = None
                first_attempt.set()
                backoff = 1.0
                log.info("telegram connected", bot=self._me.username if self._me else None)
                if self._poller is not None:
                    await self._poller.run()
                return
            except TelegramError as exc:
                self.not_ready_reason = self._connect_failure(exc)
                log.warning(
                    "telegram connect failed", reason=self.not_ready_reason, retry_in=backoff
                )
            except Exception as exc:
                self.not_ready_reason = f"telegram channel failed: {type(exc).__name__}"
                log.exception("telegram channel failed; restarting", retry_in=backoff)
            first_attempt.set()
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, _MAX_BACKOFF)

    async def _connect(self) -> None:
        bot, runtime = self._require_bot(), self._require_runtime()
        await bot.initialize()
        me = bot.bot
        self._me = BotIdentity(me.id, me.username or "")
        if self.config.mode is TelegramMode.POLLING:
            await bot.delete_webhook(drop_pending_updates=False)
            self._poller = UpdatePoller(
                bot,
                runtime,
                self._handle_update,
                timeout=self.config.poll_timeout_secs,
                set_status=self._set_status,
                redact=self._redact,
            )
        else:
            await bot.set_webhook(
                url=self.config.webhook_url or "",
                secret_token=self._secret,
                allowed_updates=ALLOWED_UPDATES,
            )

    def _connect_failure(self, exc: TelegramError) -> str:
        if isinstance(exc, InvalidToken):
            return "telegram rejected the bot token (check channels.telegram.token)"
        return f"cannot reach telegram: {type(exc).__name__}: {self._redact(exc.message)}"

    def _set_status(self, reason: str | None) -> None:
        self.not_ready_reason = reason

    # -- inbound ----------------------------------------------------------------------------

    async def _on_webhook(self, request: web.Request) -> web.StreamResponse:
        given = request.headers.get(SECRET_HEADER, "")
        if not hmac.compare_digest(given.encode("utf-8", "surrogateescape"), self._secret.encode()):
            log.warning("telegram webhook refused: wrong secret token", remote=request.remote)
            return web.json_response({"ok": False, "error": "forbidden"}, status=403)
        if self._me is None or self._bot is None:
            return web.json_response({"ok": False, "error": "not ready"}, status=503)
        raw = await request.read()
        body: object = None
        try:
            body = json.loads(raw)
            if not isinstance(body, dict):
                raise TypeError("update is not an object")
            update = Update.de_json(body, self._bot)
            if update is None:
                raise ValueError("empty update")
        except Exception as exc:  # anything PTB cannot turn into an Update is the sender's fault
            # kept and answered 200: Telegram would redeliver it, and hold back
            # every update behind it, for as long as we refused it
            log.warning("telegram webhook: malformed update", error=type(exc).__name__)
            update_id = body.get("update_id") if isinstance(body, dict) else None
            return await self._webhook_dead_letter(
                str(update_id) if update_id is not None else None,
                raw,
                f"malformed update: {type(exc).__name__}",
            )
        try:
            await self._handle_update(update)
        except BusClosed:
            return web.json_response({"ok": False, "error": "shutting down"}, status=503)
        return web.json_response({"ok": True})

    async def _webhook_dead_letter(
        self, update_id: str | None, raw: bytes, reason: str
    ) -> web.StreamResponse:
        try:
            await self._require_runtime().dead_letter(update_id, raw, reason)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("telegram webhook: dead letter not recorded")
            return web.json_response({"ok": False, "error": "not recorded"}, status=500)
        return web.json_response({"ok": True})

    async def _handle_update(self, update: Update) -> None:
        """Record one update (raises only if it could not be recorded, e.g. BusClosed)."""
        me, runtime = self._me, self._require_runtime()
        if me is None:
            raise RuntimeError("telegram update before connect")
        if update.callback_query is not None:
            await self._on_press(update, runtime)
            return
        try:
            parsed = parse_update(update, me, edits=self.config.edited_messages)
        except Exception as exc:
            log.warning("telegram update could not be read", update_id=update.update_id)
            await runtime.dead_letter(
                str(update.update_id), update.to_json(), f"unreadable update: {type(exc).__name__}"
            )
            return
        if parsed is None:
            log.debug("telegram update ignored", update_id=update.update_id)
            return
        message = await self._to_inbound(parsed)
        receipt = await runtime.bus.submit(message)
        log.debug("telegram message recorded", message_id=message.message_id, receipt=receipt.value)

    async def _on_press(self, update: Update, runtime: ChannelRuntime) -> None:
        """An Approve / Deny press: recorded as the command it stands for."""
        message = button_press(update, self.name)
        if message is not None:
            receipt = await runtime.bus.submit(message)
            log.debug(
                "telegram press recorded", message_id=message.message_id, receipt=receipt.value
            )
        await answer_press(self._require_bot(), update)

    async def _to_inbound(self, parsed: ParsedMessage) -> InboundMessage:
        media: list[MediaRef] = []
        notes: list[str] = []
        fetcher = self._media
        for attachment in parsed.attachments:
            if fetcher is None:
                break
            fetched = await fetcher.fetch(parsed.chat_id, parsed.telegram_message_id, attachment)
            if fetched.ref is not None:
                media.append(fetched.ref)
            if fetched.note is not None:
                notes.append(fetched.note)
        text = "\n".join([parsed.text, *notes]).strip()
        return InboundMessage(
            channel=self.name,
            chat_id=parsed.chat_id,
            sender_id=parsed.sender_id,
            text=text,
            message_id=parsed.message_id,
            # the message to quote, and a forum topic's thread (channels.telegram.threads);
            # always set: an edit's message_id ("…:edit:<ts>") names no message to quote
            reply_ref=make_handle(parsed.chat_id, parsed.telegram_message_id, parsed.thread_id),
            chat_type=parsed.chat_type,
            media=tuple(media),
            reply_to=parsed.reply_to,
            mentions=parsed.mentions,
            metadata=parsed.metadata,
            sender_aliases=tuple(i for i in parsed.sender_ids if i != parsed.sender_id),
            addressed=parsed.addressed,
            language=parsed.language,
        )

    # -- outbound ---------------------------------------------------------------------------

    async def send(self, message: OutboundMessage) -> SendResult:
        sender = self._sender
        if sender is None:
            # Not started yet (or stopped): the dispatcher retries later, nothing is dropped.
            raise TransientSendError("telegram channel is not started")
        if not message.text.strip() and not message.media:
            return SendResult()
        # one file with a short text: the text is its caption, one message
        caption = _caption(message)
        parts = split_text(message.text, TEXT_LIMIT) if message.text.strip() and not caption else []
        reply_to = _reply_target(message)
        _, thread_id = parse_handle(message.reply_to_message_id)  # every part stays in the topic
        markup = approval_keyboard(message)  # buttons under the last part
        progress = self._parts
        assert progress is not None  # made in start(), with the sender
        sent = await progress.sent(message)
        stream_message_id = None
        if self._streams is not None and parts:  # a file alone never ends a stream
            stream_message_id = await self._streams.take(message.chat_id, message.run_id)
        ids = list(sent)
        total = len(parts) + len(message.media)
        saved = len(sent)  # how many of `ids` the stored progress holds
        try:
            for index, part in enumerate(parts):
                if index < len(sent):
                    continue  # delivered by an earlier attempt of this same reply
                if index == 0 and stream_message_id is not None:
                    ids.append(
                        await self._replace_stream(
                            message.chat_id, stream_message_id, part, thread_id
                        )
                    )
                else:
                    ids.append(
                        await sender.send_text(
                            message.chat_id,
                            part,
                            reply_to if index == 0 else None,
                            thread_id=thread_id,
                            markup=markup if index == len(parts) - 1 else None,
                        )
                    )
                saved = await _record_part(progress, message, ids, saved, total)
            for index, media in enumerate(message.media, start=len(parts)):
                if index < len(sent):
                    continue
                ids.append(await self._send_media(message.chat_id, media, caption, thread_id))
                saved = await _record_part(progress, message, ids, saved, total)
        except BaseException:
            # a failure, or a cancellation (the dispatcher's send timeout), mid-reply:
            # the parts that went out are remembered, so a retry does not repeat them
            await asyncio.shield(progress.save(message, list(ids), previously=saved))
            raise
        if saved:
            await progress.clear(message)
        return SendResult(tuple(str(i) for i in ids))

    async def _send_media(
        self, chat_id: str, media: MediaRef, caption: str | None, thread_id: int | None
    ) -> int:
        sender = self._sender
        assert sender is not None
        try:
            data = await asyncio.to_thread(Path(media.path).read_bytes)
        except OSError as exc:
            raise PermanentSendError(f"the file to send is gone: {exc.strerror}") from None
        name = media.name or Path(media.path).name
        send_as = plan(media.kind, len(data), image_size(data))
        if send_as is SendAs.NOTHING:
            log.info("telegram file not sent: too large", size=len(data), chat_id=chat_id)
            note = too_large_note(name, len(data))
            text = f"{note}\n\n{caption}" if caption else note
            return await sender.send_plain(chat_id, text, thread_id=thread_id)
        return await sender.send_file(
            chat_id,
            data,
            name=name,
            photo=send_as is SendAs.PHOTO,
            caption=caption,
            thread_id=thread_id,
        )

    def preview_media(self, media: MediaRef, size: int) -> str:
        """How `media` (`size` bytes) will go out, for the `send_file` tool's
        answer; raises PermanentSendError when it will not. Reads the file's
        header: call it off the event loop."""
        with Path(media.path).open("rb") as file:
            head = file.read(HEADER_BYTES)
        return preview(media.kind, size, image_size(head))

    async def _replace_stream(
        self, chat_id: str, message_id: int, part: str, thread_id: int | None
    ) -> int:
        sender = self._sender
        assert sender is not None
        try:
            await sender.edit_text(chat_id, message_id, part, html=True)
            return message_id
        except PermanentSendError:
            # The streamed message is gone or not editable: send the part fresh.
            return await sender.send_text(chat_id, part, thread_id=thread_id)

    async def notify(self, event: ChannelEvent) -> None:
        _, thread_id = parse_handle(event.reply_to_message_id)
        try:
            if event.kind is EventKind.WORKING and self._typing is not None:
                self._typing.start(event.chat_id, thread_id)
            elif event.kind is EventKind.IDLE and self._typing is not None:
                await self._typing.stop(event.chat_id)
            elif event.kind is EventKind.DELTA and self.config.streaming and self._streams:
                await self._streams.delta(event.chat_id, event.run_id, event.text, thread_id)
            elif event.kind is EventKind.TOOL and self._tool_progress is not None:
                self._tool_progress.show(event)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("telegram notify failed", kind=event.kind.value, error=type(exc).__name__)

    # -- helpers ----------------------------------------------------------------------------

    def _require_runtime(self) -> ChannelRuntime:
        if self._runtime is None:
            raise RuntimeError("telegram channel used before setup()")
        return self._runtime

    def _require_bot(self) -> RawUpdatesBot:
        if self._bot is None:
            raise RuntimeError("telegram channel used before start()")
        return self._bot


async def _record_part(
    progress: PartProgress, message: OutboundMessage, ids: list[int], saved: int, total: int
) -> int:
    """Store the parts delivered so far before the next one goes, so a crash
    (even SIGKILL) repeats at most the part in flight, not the reply. The last
    part is not stored: the dispatcher marks the row sent right after it."""
    if len(ids) >= total:
        return saved
    await progress.save(message, list(ids), previously=saved)
    return len(ids)


def _caption(message: OutboundMessage) -> str | None:
    text = message.text.strip()
    if len(message.media) == 1 and text and len(text) <= CAPTION_LIMIT:
        return text
    return None


def _reply_target(message: OutboundMessage) -> int | None:
    """Quote the user's message in groups (in a private chat the context is obvious)."""
    if not message.chat_id.startswith("-"):
        return None
    message_id, _ = parse_handle(message.reply_to_message_id)
    return message_id
