"""The Feishu/Lark channel: lifecycle, mode selection, sending and the typing reaction.

`mode: ws` (default) keeps a long connection to Feishu (no public URL needed);
`mode: webhook` serves POST /webhooks/feishu. Both feed the same
`InboundHandler`, which returns only once a message is durable, and only then is
Feishu acknowledged. Feishu has no typing API: the configured reaction
("Typing") is added to the user's message when a turn starts and removed when
it ends. A turn's tool calls (`gateway.show_tool_results`) are one card,
updated in place (`channels.feishu.progress`). Every task started here is
tracked and cancelled by `stop()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Coroutine

import structlog

from channels.base import (
    Capabilities,
    Channel,
    ChannelError,
    ChannelRuntime,
    SendResult,
)
from channels.feishu.api import FeishuApi, FeishuApiError
from channels.feishu.config import FeishuConfig, FeishuMode
from channels.feishu.inbound import InboundHandler, MessageIdMap
from channels.feishu.limits import preview
from channels.feishu.longconn import LongConnection
from channels.feishu.outbound import markdown_card, receive_id_type, send_reply
from channels.feishu.parse import Envelope, EventFormatError, parse_envelope
from channels.feishu.progress import tool_progress
from channels.feishu.webhook import WEBHOOK_PATH, FeishuWebhook
from channels.stream_preview import PreviewStreams
from gateway.bus import ChannelEvent, EventKind, MediaKind, MediaRef, OutboundMessage

__all__ = ["FeishuChannel"]

log = structlog.get_logger("channels.feishu")

_NOTIFY_TIMEOUT_SECS = 10.0


class FeishuChannel(Channel):
    name = "feishu"
    progress_interval_secs = 1.0  # updates of a turn's tool-progress card

    def __init__(self, config: FeishuConfig) -> None:
        super().__init__()
        self.config = config
        # one long connection per app: events go to one of them (docs/scale-out.md)
        self.exclusive_connection = config.mode is FeishuMode.WS
        self.capabilities = Capabilities(
            max_message_chars=config.max_message_chars,
            can_edit=True,  # cards only: the tool-progress card, a streamed reply
            can_stream=config.streaming,
            can_show_typing=bool(config.reaction_emoji),
            media_kinds=frozenset(MediaKind),
            send_media=frozenset(MediaKind),  # images as images, anything else as a file
        )
        self.api = FeishuApi(
            config.base_url,
            config.app_id,
            config.app_secret,
            timeout_secs=config.http_timeout_secs,
            max_retries=config.api_max_retries,
        )
        self._ids = MessageIdMap()
        self._bot_open_id = config.bot_open_id
        self._bot_lock = asyncio.Lock()
        self._runtime: ChannelRuntime | None = None
        self._inbound: InboundHandler | None = None
        self._connection: LongConnection | None = None
        self._connection_task: asyncio.Task[None] | None = None
        self._reactions: dict[str, asyncio.Task[str | None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._tool_progress = tool_progress(self.api, self._ids, self.progress_interval_secs)
        # a streamed reply: one shared card, updated in place (≤ 5 updates a second
        # per message; a card holds ~30 KB, so the preview shows the start of a longer reply)
        self._streams: PreviewStreams[str | None, str] = PreviewStreams(
            self._post_stream,
            self._patch_stream,
            min_interval=self.progress_interval_secs,
            max_chars=20_000,
            name="feishu-stream",
        )

    # -- lifecycle -----------------------------------------------------------

    def setup(self, runtime: ChannelRuntime) -> None:
        self._runtime = runtime
        self._inbound = InboundHandler(self.config, self.api, runtime, self.bot_open_id, self._ids)
        if self.config.mode is FeishuMode.WEBHOOK:
            runtime.http.add_route(
                "POST", WEBHOOK_PATH, FeishuWebhook(self.config, self._handle, runtime).handle
            )

    async def start(self) -> None:
        if self._inbound is None:
            raise RuntimeError("FeishuChannel.setup() must run before start()")
        await self.api.open()
        # Best effort: an unreachable platform must not hold up start-up; retried on demand.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_NOTIFY_TIMEOUT_SECS):
                await self.bot_open_id()
        if self.config.mode is FeishuMode.WEBHOOK:
            if self.config.encrypt_key is None and self.config.verification_token is None:
                log.warning(
                    "feishu webhook unauthenticated: neither encrypt_key nor verification_token "
                    "is set, so anyone who can reach the URL can forge events",
                    channel="feishu",
                )
            self.not_ready_reason = None
            return
        self.not_ready_reason = "feishu long connection: connecting"
        self._connection = LongConnection(
            self.api,
            self._handle_frame_payload,
            self._set_state,
            ping_interval_secs=self.config.ws_ping_interval_secs,
            reconnect_base_secs=self.config.ws_reconnect_base_secs,
            reconnect_max_secs=self.config.ws_reconnect_max_secs,
            connect_timeout_secs=self.config.ws_connect_timeout_secs,
        )
        self._connection_task = asyncio.create_task(
            self._connection.run(), name="feishu-long-connection"
        )
        # Return once connected, or once the first attempt failed (reason is set
        # and the connection task keeps retrying).
        first = asyncio.create_task(
            self._connection.first_attempt_done.wait(), name="feishu-first-connect"
        )
        try:
            await asyncio.wait({first, self._connection_task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            first.cancel()
            await asyncio.gather(first, return_exceptions=True)
        if self._connection_task.done() and not self._connection_task.cancelled():
            self._connection_task.result()  # an import error etc.: fail start-up loudly

    async def stop(self) -> None:
        self.not_ready_reason = "stopped"
        pending: list[asyncio.Task[object]] = [*self._tasks, *self._reactions.values()]
        if self._connection_task is not None:
            pending.append(self._connection_task)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        self._tasks.clear()
        self._reactions.clear()
        self._connection_task = None
        await self._tool_progress.close()
        await self._streams.close()
        await self.api.close()

    def _set_state(self, reason: str | None) -> None:
        self.not_ready_reason = reason

    # -- inbound -------------------------------------------------------------

    async def bot_open_id(self) -> str | None:
        """The bot's open_id (config or GET /bot/v3/info); None while unknown."""
        if self._bot_open_id is not None:
            return self._bot_open_id
        async with self._bot_lock:
            if self._bot_open_id is None:
                try:
                    self._bot_open_id = await self.api.bot_open_id()
                except ChannelError as exc:
                    log.warning("feishu: bot info unavailable", error=str(exc))
        return self._bot_open_id

    async def _handle(self, envelope: Envelope) -> None:
        assert self._inbound is not None
        await self._inbound.handle(envelope)

    async def _handle_frame_payload(self, payload: bytes) -> None:
        """Long connection: a malformed event is kept as a dead letter and
        acknowledged, not retried (a failure to keep it raises: no ack)."""
        assert self._inbound is not None
        assert self._runtime is not None
        try:
            envelope = parse_envelope(json.loads(payload))
        except (ValueError, EventFormatError) as exc:
            log.warning("feishu long connection: malformed event", error=type(exc).__name__)
            await self._runtime.dead_letter(None, payload, f"malformed event: {exc}"[:200])
            return
        try:
            await self._inbound.handle(envelope)
        except EventFormatError as exc:
            log.warning("feishu long connection: unreadable event", error=type(exc).__name__)
            await self._runtime.dead_letter(
                envelope.event_id, payload, f"unreadable event: {type(exc).__name__}"
            )

    # -- outbound ------------------------------------------------------------

    async def send(self, message: OutboundMessage) -> SendResult:
        target = self._ids.resolve(message.reply_to_message_id)
        if target is None:
            meta = message.metadata.get("feishu_message_id")
            target = meta if isinstance(meta, str) and meta.startswith("om_") else None
        return await send_reply(
            self.api,
            message,
            target,
            self.config.max_message_chars,
            cards=self.config.card_replies,
            reply_in_thread=self.config.reply_in_thread,
            state=self._runtime.state if self._runtime is not None else None,
            streaming=self.config.streaming,
            stream_card=await self._streams.take(message.chat_id, message.run_id),
        )

    def preview_media(self, media: MediaRef, size: int) -> str:
        """How `media` will go out, for the `send_file` tool's answer (raises
        PermanentSendError when it will not: channels/feishu/limits.py)."""
        return preview(media.kind, size)

    async def _post_stream(self, chat_id: str, target: str | None, text: str) -> str:
        card = markdown_card(text)
        if target is not None:
            try:
                return await self.api.reply_message(target, "interactive", card, None)
            except FeishuApiError:
                pass  # the message answered may be gone: stream into the chat instead
        return await self.api.send_message(
            chat_id, "interactive", card, None, id_type=receive_id_type(chat_id)
        )

    async def _patch_stream(self, chat_id: str, message_id: str, text: str) -> None:
        await self.api.patch_message(message_id, markdown_card(text))

    async def notify(self, event: ChannelEvent) -> None:
        if event.kind is EventKind.TOOL:
            self._tool_progress.show(event)
            return
        if event.kind is EventKind.DELTA:
            if self.config.streaming:
                target = self._ids.resolve(event.reply_to_message_id)
                await self._streams.delta(event.chat_id, event.run_id, event.text, target)
            return
        emoji = self.config.reaction_emoji
        target = self._ids.resolve(event.reply_to_message_id)
        if not emoji or target is None:
            return
        if event.kind is EventKind.WORKING and target not in self._reactions:
            self._reactions[target] = asyncio.create_task(
                self._add_reaction(target, emoji), name=f"feishu-reaction-add-{target}"
            )
        elif event.kind is EventKind.IDLE and target in self._reactions:
            added = self._reactions.pop(target)
            self._track(self._remove_reaction(target, added), f"feishu-reaction-del-{target}")

    async def _add_reaction(self, message_id: str, emoji: str) -> str | None:
        try:
            async with asyncio.timeout(_NOTIFY_TIMEOUT_SECS):
                return await self.api.add_reaction(message_id, emoji)
        except (ChannelError, TimeoutError) as exc:
            log.info("feishu: typing reaction not added", error=str(exc))
            return None

    async def _remove_reaction(self, message_id: str, added: asyncio.Task[str | None]) -> None:
        try:
            async with asyncio.timeout(_NOTIFY_TIMEOUT_SECS):
                reaction_id = await added
                if reaction_id:
                    await self.api.delete_reaction(message_id, reaction_id)
        except (ChannelError, TimeoutError) as exc:
            log.info("feishu: typing reaction not removed", error=str(exc))

    def _track(self, coro: Coroutine[object, object, None], name: str) -> None:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
