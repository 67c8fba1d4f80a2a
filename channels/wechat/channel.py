"""`WechatChannel`: personal WeChat over Tencent's iLink bot API.

Wires the pieces — credentials, long-poll receiver, context tokens, media, typing
— into the `Channel` contract, and owns sending: split to `max_message_chars`,
echo the user's latest context_token, a client_id per part derived from the
message's random idempotency key (stable across the retries of its outbox row
only) and iLink's answers mapped to typed errors.
WeChat cannot edit a message: a turn's tool calls (`gateway.show_tool_results`)
come as one TOOL event when its tool work is over and go out as one message.
Without credentials the channel stays not-ready and the gateway runs on.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

import aiohttp
import structlog

from channels.base import (
    Capabilities,
    Channel,
    ChannelError,
    ChannelRuntime,
    PermanentSendError,
    RateLimited,
    RecipientOffline,
    SendResult,
    TransientSendError,
    split_text,
)
from channels.progress import progress_text
from channels.wechat.api import (
    ITEM_TEXT,
    ILinkClient,
    ILinkError,
    ILinkHttpError,
    ILinkRetError,
)
from channels.wechat.config import WechatConfig
from channels.wechat.contexts import ContextTokens
from channels.wechat.credentials import Credentials, CredentialWatch, resolve_cred_path
from channels.wechat.media import MediaFetcher
from channels.wechat.poller import EXPIRED_REASON, NOT_LOGGED_IN_REASON, UpdatePoller
from channels.wechat.typing_indicator import TypingIndicator
from channels.wechat.upload import item_for, upload_once
from gateway.bus import ChannelEvent, EventKind, MediaKind, MediaRef, OutboundMessage

__all__ = ["WechatChannel"]

log = structlog.get_logger("picobot.channels.wechat")

# sendmessage ret -2: "context restricted" (also said of throttling): iLink
# takes no more replies on this context until the user writes again.
CONTEXT_RESTRICTED = -2
RESTRICTED_REASON = (
    "WeChat refused the reply (ret -2, context restricted); "
    "it goes out when the user sends their next message"
)
_SENT_MEMORY = 2048
_NOTIFY_TIMEOUT_SECS = 5.0


class WechatChannel(Channel):
    name = "wechat"
    exclusive_connection = True  # iLink ends the other session of the account (docs/scale-out.md)

    def __init__(self, config: WechatConfig, *, clock: Callable[[], float] = time.time) -> None:
        super().__init__()
        self.config = config
        self._clock = clock  # wall seconds: context-token and typing-ticket ages
        self.capabilities = Capabilities(
            max_message_chars=config.max_message_chars,
            can_show_typing=config.typing,
            media_kinds=frozenset(
                {MediaKind.IMAGE, MediaKind.FILE, MediaKind.VIDEO, MediaKind.AUDIO}
            ),
            send_media=frozenset({MediaKind.IMAGE, MediaKind.FILE}),
        )
        self._runtime: ChannelRuntime | None = None
        self._session: aiohttp.ClientSession | None = None
        self._client: ILinkClient | None = None
        self._contexts: ContextTokens | None = None
        self._typing: TypingIndicator | None = None
        self._poll_task: asyncio.Task[None] | None = None
        # client_id → platform id of parts already delivered (skip them on a retry)
        self._sent: OrderedDict[str, str] = OrderedDict()

    def setup(self, runtime: ChannelRuntime) -> None:
        self._runtime = runtime

    @property
    def cred_path(self) -> Path:
        if self._runtime is None:
            raise RuntimeError("setup() was not called")
        return resolve_cred_path(self.config.cred_path, self._runtime.media_dir.parent)

    @property
    def media_dir(self) -> Path:
        if self._runtime is None:
            raise RuntimeError("setup() was not called")
        if self.config.media_dir:
            return Path(self.config.media_dir).expanduser()
        return self._runtime.media_dir / self.name

    def _set_status(self, reason: str | None) -> None:
        if reason != self.not_ready_reason:
            log.info("wechat readiness", channel=self.name, ready=reason is None, reason=reason)
        self.not_ready_reason = reason

    def _apply_credentials(self, creds: Credentials) -> None:
        if self._runtime is not None:
            self._runtime.register_secret(creds.bot_token)
        if self._client is not None:
            self._client.with_token(creds.bot_token)
            self._client.with_base_url(creds.baseurl or self.config.base_url)

    async def start(self) -> None:
        if self._runtime is None:
            raise RuntimeError("setup() must be called before start()")
        if self._poll_task is not None:
            raise RuntimeError("the wechat channel is already started")
        runtime = self._runtime
        self._session = aiohttp.ClientSession()
        self._client = ILinkClient(
            self._session, self.config.base_url, request_timeout=self.config.request_timeout_secs
        )
        watch = CredentialWatch(self.cred_path, self.config.credential_check_secs)
        creds = await watch.load()
        self._contexts = ContextTokens(
            runtime.state,
            refresh_after_secs=self.config.context_refresh_secs,
            max_sends=self.config.context_max_sends,
            clock=self._clock,
        )
        self._typing = TypingIndicator(
            self._client,
            self._contexts,
            self.config.typing_interval_secs,
            ticket_ttl=self.config.typing_ticket_ttl_secs,
            clock=self._clock,
        )
        media = MediaFetcher(
            self._client,
            cdn_base_url=self.config.cdn_base_url,
            directory=self.media_dir,
            max_bytes=self.config.max_media_bytes,
        )
        if creds is None:
            self._set_status(NOT_LOGGED_IN_REASON)
        elif creds.expired:
            self._set_status(EXPIRED_REASON)
        else:
            self._apply_credentials(creds)
            await self._notify_start()
        poller = UpdatePoller(
            name=self.name,
            config=self.config,
            runtime=runtime,
            client=self._client,
            watch=watch,
            contexts=self._contexts,
            media=media,
            set_status=self._set_status,
            apply_credentials=self._apply_credentials,
        )
        self._poll_task = asyncio.create_task(poller.run(), name="wechat-poller")

    async def _notify_start(self) -> None:
        """Tell iLink we are here; a reachable host makes us ready."""
        assert self._client is not None
        try:
            await self._client.notify(True)
        except ILinkRetError as exc:
            if exc.session_expired:
                self._set_status(EXPIRED_REASON)  # the poller pauses on its first -14
                return
            log.info("wechat notifystart refused", channel=self.name, error=str(exc))
        except (ILinkError, TimeoutError) as exc:
            self._set_status(f"cannot reach WeChat iLink: {exc}")
            return
        self._set_status(None)

    async def stop(self) -> None:
        task, self._poll_task = self._poll_task, None
        if task is not None:
            task.cancel()
            await asyncio.wait([task])  # our own cancellation still propagates
        if self._typing is not None:
            await self._typing.close()
        if self._client is not None and self.ready:
            with contextlib.suppress(ILinkError, TimeoutError):
                await asyncio.wait_for(self._client.notify(False), _NOTIFY_TIMEOUT_SECS)
        if self._session is not None:
            await self._session.close()
            self._session = None
        self._client = None
        self.not_ready_reason = "stopped"

    async def send(self, message: OutboundMessage) -> SendResult:
        if self._client is None or self._contexts is None:
            raise TransientSendError("the wechat channel is not running")
        user = message.chat_id
        if not message.text.strip() and not message.media:
            return SendResult()
        if not await self._contexts.get(user):
            raise PermanentSendError(
                "no context_token for this WeChat user yet: they must message the bot first"
            )
        parts = (
            split_text(message.text, self.config.max_message_chars) if message.text.strip() else []
        )
        items: list[str | MediaRef] = [*parts, *message.media]
        ids: list[str] = []
        for index, content in enumerate(items):
            client_id = f"picobot-{message.idempotency_key}-{index}"
            done = self._sent.get(client_id)
            if done is None:
                done = await self._send_one(user, client_id, content)
                self._remember_sent(client_id, done)
            ids.append(done)
        return SendResult(tuple(ids))

    async def _send_one(self, user: str, client_id: str, content: str | MediaRef) -> str:
        assert self._client is not None
        assert self._contexts is not None
        runtime = self._runtime
        assert runtime is not None
        try:
            if isinstance(content, str):
                item = {"type": ITEM_TEXT, "text_item": {"text": content}}
            else:
                up = await upload_once(
                    self._client,
                    runtime.state,
                    client_id,
                    self.config.cdn_base_url,
                    user,
                    content,
                    self.config.request_timeout_secs * 4,
                )
                item = item_for(up)
            # per part: a long reply may outlive its token or its send budget
            context = await self._contexts.for_send(self._client, user) or ""
            platform_id = await self._client.send_item(
                to_user_id=user, client_id=client_id, item=item, context_token=context
            )
        except (ILinkError, TimeoutError) as exc:  # first: TimeoutError is an OSError too
            raise await self._send_error(user, exc) from None
        except (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError) as exc:
            raise PermanentSendError(f"the file to send is gone: {exc.strerror}") from None
        self._contexts.sent(user)
        return platform_id or client_id

    def _remember_sent(self, client_id: str, platform_id: str) -> None:
        self._sent[client_id] = platform_id
        while len(self._sent) > _SENT_MEMORY:
            self._sent.popitem(last=False)

    async def _send_error(self, user: str, exc: ILinkError | TimeoutError) -> ChannelError:
        if isinstance(exc, ILinkRetError):
            if CONTEXT_RESTRICTED in (exc.ret, exc.errcode):
                # Retrying on a timer only meets the same refusal: the row is
                # parked (its reason says why) until the user's next message.
                assert self._contexts is not None
                await self._contexts.restrict(user)
                log.warning("wechat reply parked: context restricted", channel=self.name)
                return RecipientOffline(RESTRICTED_REASON)
            if exc.session_expired:
                return TransientSendError(f"{exc} ({EXPIRED_REASON})")
            return TransientSendError(str(exc))
        if isinstance(exc, ILinkHttpError):
            if exc.status == 429:
                return RateLimited(str(exc), self.config.rate_limit_retry_secs)
            if exc.status in (400, 403, 404):
                return PermanentSendError(str(exc))
            return TransientSendError(str(exc))
        if isinstance(exc, TimeoutError):
            return TransientSendError("iLink sendmessage timed out")
        return TransientSendError(str(exc))

    async def notify(self, event: ChannelEvent) -> None:
        if event.kind is EventKind.TOOL:
            await self._send_progress(event)
            return
        if self._typing is None or not self.config.typing:
            return
        try:
            if event.kind is EventKind.WORKING:
                self._typing.start(event.chat_id)
            elif event.kind is EventKind.IDLE:
                await self._typing.stop(event.chat_id)
        except Exception as exc:  # best effort by contract: never raise from notify
            log.info("wechat notify failed", channel=self.name, error=str(exc))

    async def _send_progress(self, event: ChannelEvent) -> None:
        """The turn's one progress message; best effort, not in the outbox."""
        if not event.tool_calls:
            return
        text = progress_text(event.tool_calls)
        message = OutboundMessage(self.name, event.chat_id, text, session_id=event.session_id)
        try:
            async with asyncio.timeout(_NOTIFY_TIMEOUT_SECS):
                await self.send(message)
        except (ChannelError, TimeoutError) as exc:
            log.info("wechat tool progress not sent", channel=self.name, error=str(exc))
