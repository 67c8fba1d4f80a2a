"""`WecomKfChannel`: WeChat users through a WeCom customer-service account (微信客服).

WeCom's callback only says that messages wait; the channel pulls them with
`kf/sync_msg` (channels.wecom_kf.sync) and answers with `kf/send_msg`. A chat
is one customer of one account: chat id `<open_kfid>:<external_userid>`.
WeCom has no typing or edit API, and every message counts against the
"5 messages within 48 h of the customer's last one" quota, so TOOL events are
not shown here: the quota is kept for replies. Every task started here is
owned and cancelled by `stop()`.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict

import structlog

from channels.base import (
    Capabilities,
    Channel,
    ChannelRuntime,
    PermanentSendError,
    SendResult,
    TransientSendError,
)
from channels.wecom_kf.allowance import Allowance, cut_to_allowance
from channels.wecom_kf.api import KfApi, KfError
from channels.wecom_kf.callback import CallbackEndpoint
from channels.wecom_kf.config import WecomKfConfig
from channels.wecom_kf.crypto import CallbackCrypto
from channels.wecom_kf.inbound import CHANNEL, InboundHandler, split_chat_id
from channels.wecom_kf.outbound import send_error, split_bytes
from channels.wecom_kf.parse import CallbackNotice
from channels.wecom_kf.sync import KfSyncer
from gateway.bus import ChannelEvent, MediaKind, OutboundMessage

__all__ = ["WecomKfChannel"]

log = structlog.get_logger("channels.wecom_kf")

_SENT_MEMORY = 2048


class WecomKfChannel(Channel):
    name = CHANNEL

    def __init__(self, config: WecomKfConfig) -> None:
        super().__init__()
        self.config = config
        self.capabilities = Capabilities(
            # CJK is 3 bytes a character: a reply of this many chars is one message.
            max_message_chars=config.max_message_bytes // 3,
            media_kinds=frozenset(MediaKind),
        )
        self._crypto = CallbackCrypto(
            config.token.get_secret_value(),
            config.encoding_aes_key.get_secret_value(),
            config.corp_id,
        )
        self._api: KfApi | None = None
        self._syncer: KfSyncer | None = None
        self._allowance: Allowance | None = None
        self._task: asyncio.Task[None] | None = None
        # msgid of parts already delivered (skipped when the outbox retries a row)
        self._sent: OrderedDict[str, str] = OrderedDict()

    def setup(self, runtime: ChannelRuntime) -> None:
        self._api = KfApi(
            self.config.api_base,
            self.config.corp_id,
            self.config.secret.get_secret_value(),
            state=runtime.state,
            timeout_secs=self.config.http_timeout_secs,
            on_token=runtime.register_secret,
        )
        self._allowance = Allowance(runtime.state)
        inbound = InboundHandler(self.config, self._api, runtime, self._allowance)
        self._syncer = KfSyncer(
            self.config, self._api, runtime.state, inbound.handle, self._set_status
        )
        endpoint = CallbackEndpoint(self._crypto, self._notice, self.config.max_callback_body_bytes)
        runtime.http.add_route("GET", self.config.path, endpoint.verify_url)
        runtime.http.add_route("POST", self.config.path, endpoint.receive)

    async def start(self) -> None:
        if self._api is None or self._syncer is None:
            raise RuntimeError("WecomKfChannel.setup() must run before start()")
        if self._task is not None:
            raise RuntimeError("the wecom_kf channel is already started")
        await self._api.open()
        await self._syncer.load()
        self._task = asyncio.create_task(self._syncer.run(), name="wecom-kf-syncer")
        self._set_status(None)  # callbacks are served; a failing pull says so

    async def stop(self) -> None:
        self.not_ready_reason = "stopped"
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait([task])  # our own cancellation still propagates
        if self._api is not None:
            await self._api.close()

    def _set_status(self, reason: str | None) -> None:
        if reason != self.not_ready_reason:
            log.info("wecom_kf readiness", ready=reason is None, reason=reason)
        self.not_ready_reason = reason

    async def _notice(self, notice: CallbackNotice) -> None:
        if self._syncer is None:
            raise RuntimeError("the wecom_kf channel is not set up")
        if self.config.open_kfids and notice.open_kfid not in self.config.open_kfids:
            log.info("wecom_kf callback for an account not in open_kfids ignored")
            return
        await self._syncer.notice(notice.open_kfid, notice.token)

    async def send(self, message: OutboundMessage) -> SendResult:
        if self._api is None or self._task is None or self._allowance is None:
            raise TransientSendError("the wecom_kf channel is not running")
        if not message.text.strip():
            return SendResult()
        try:
            open_kfid, user = split_chat_id(message.chat_id)
        except ValueError as exc:
            raise PermanentSendError(str(exc)) from None
        base = message.idempotency_key[:28]  # with "_<part>": within the 32-byte msgid limit
        limit = self.config.max_message_bytes
        parts = split_bytes(message.text, limit)
        # this row's parts sent before a retry were counted already: the cut stays put
        already = sum(f"{base}_{index}" in self._sent for index in range(len(parts)))
        left = await self._allowance.left(open_kfid, user) + already
        if len(parts) > left > 0:
            log.warning(
                "wecom_kf: reply cut to the customer's allowance", parts=len(parts), sent=left
            )
        parts = cut_to_allowance(parts, left, limit)
        ids: list[str] = []
        for index, part in enumerate(parts):
            # ≤ 32 bytes of [0-9a-zA-Z_-]; stable across the outbox's retries
            msgid = f"{base}_{index}"
            done = self._sent.get(msgid)
            if done is not None:
                ids.append(done)
                continue
            try:
                sent = await self._api.send_text(
                    touser=user, open_kfid=open_kfid, content=part, msgid=msgid
                )
            except KfError as exc:
                raise send_error(exc, self.config.rate_limit_retry_secs) from None
            self._sent[msgid] = sent
            await self._allowance.spent_one(open_kfid, user)
            while len(self._sent) > _SENT_MEMORY:
                self._sent.popitem(last=False)
            ids.append(sent)
        return SendResult(tuple(ids))

    async def notify(self, event: ChannelEvent) -> None:
        """No typing or edit API, and tool progress would use up the send quota."""
