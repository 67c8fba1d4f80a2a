"""One `kf/sync_msg` item → at most one durable `InboundMessage`.

Returns only once the message is recorded (`bus.submit` returned) or was
deliberately dropped, so the syncer may advance the cursor after a page.
Dropped, each with a log line: items we cannot read (acknowledged so one bad
item never stalls the account; the dead-letter table of the hardening work is
the better home once it exists), events, messages not from the customer
(`origin` ≠ 3), accounts outside `open_kfids`. The msgid is the inbox dedup
key, so a replayed item is never answered twice, across restarts too.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path
from typing import Any

import structlog

from channels.base import ChannelRuntime
from channels.wecom_kf.allowance import Allowance
from channels.wecom_kf.api import KfApi, KfError, KfMediaTooLarge
from channels.wecom_kf.config import WecomKfConfig
from channels.wecom_kf.parse import KfEvent, KfMessage, MalformedItem, Origin, parse_item
from gateway.bus import ChatType, InboundMessage, MediaKind, MediaRef

__all__ = ["CHANNEL", "InboundHandler", "chat_id_of", "split_chat_id"]

log = structlog.get_logger("channels.wecom_kf")

CHANNEL = "wecom_kf"
_RECORDED_MAX = 10_000
_KINDS = {
    "image": MediaKind.IMAGE,
    "voice": MediaKind.AUDIO,
    "video": MediaKind.VIDEO,
    "file": MediaKind.FILE,
}


def chat_id_of(open_kfid: str, external_userid: str) -> str:
    """A customer of one customer-service account: replies need both ids."""
    return f"{open_kfid}:{external_userid}"


def split_chat_id(chat_id: str) -> tuple[str, str]:
    open_kfid, sep, user = chat_id.partition(":")
    if not sep or not open_kfid or not user:
        raise ValueError("a wecom_kf chat id is <open_kfid>:<external_userid>")
    return open_kfid, user


class InboundHandler:
    def __init__(
        self, config: WecomKfConfig, api: KfApi, runtime: ChannelRuntime, allowance: Allowance
    ) -> None:
        self._config = config
        self._api = api
        self._runtime = runtime
        self._allowance = allowance
        self._kfids = frozenset(config.open_kfids)
        # msgids recorded by this process: a re-served item is not downloaded again
        self._recorded: OrderedDict[str, None] = OrderedDict()
        base = Path(config.media_dir).expanduser() if config.media_dir else None
        self._media_dir = base or runtime.media_dir / CHANNEL

    async def handle(self, item: dict[str, Any]) -> None:
        try:
            parsed = parse_item(item)
        except MalformedItem as exc:  # kept, and the page's cursor moves past it
            msgid = item.get("msgid")
            raw = json.dumps(item, ensure_ascii=False, default=str)
            reason = f"malformed sync_msg item: {exc}"[:200]
            await self._runtime.dead_letter(msgid if isinstance(msgid, str) else None, raw, reason)
            return
        if isinstance(parsed, KfEvent):
            self._event(parsed)
            return
        if parsed.origin != Origin.CUSTOMER:
            log.debug("wecom_kf: message not from the customer ignored", origin=parsed.origin)
            return
        if self._kfids and parsed.open_kfid not in self._kfids:
            log.info("wecom_kf: message for an account not in open_kfids ignored")
            return
        if parsed.msgid in self._recorded:
            return
        message = await self._build(parsed)
        await self._runtime.bus.submit(message)
        await self._allowance.customer_wrote(
            parsed.open_kfid, parsed.external_userid, parsed.send_time
        )
        self._recorded[parsed.msgid] = None
        while len(self._recorded) > _RECORDED_MAX:
            self._recorded.popitem(last=False)

    def _event(self, event: KfEvent) -> None:
        if event.event_type == "msg_send_fail":
            log.warning(
                "wecom_kf: WeCom reports a reply was not delivered",
                fail_msgid=event.details.get("fail_msgid"),
                fail_type=event.details.get("fail_type"),
            )
        else:
            # enter_session (a welcome_code for send_msg_on_event), session and
            # servicer status changes: nothing to answer.
            log.info("wecom_kf: event ignored", event_type=event.event_type)

    async def _build(self, parsed: KfMessage) -> InboundMessage:
        text = parsed.text
        media: list[MediaRef] = []
        if parsed.media is not None:
            kind = _KINDS[parsed.media.kind]
            try:
                got = await self._api.download_media(
                    parsed.media.media_id,
                    self._media_dir,
                    parsed.msgid,
                    self._config.max_media_bytes,
                )
            except KfMediaTooLarge:
                log.info("wecom_kf: media skipped: too large", kind=kind.value)
                text = f"[{kind.value} omitted: larger than {self._config.max_media_bytes} bytes]"
            except KfError as exc:
                log.warning("wecom_kf: media download failed", kind=kind.value, error=str(exc))
                text = f"[{kind.value} could not be downloaded]"
            else:
                media.append(MediaRef(kind, str(got.path), got.mime_type, got.name))
        return InboundMessage(
            channel=CHANNEL,
            chat_id=chat_id_of(parsed.open_kfid, parsed.external_userid),
            sender_id=parsed.external_userid,
            text=text,
            message_id=parsed.msgid,
            chat_type=ChatType.DIRECT,
            media=tuple(media),
            addressed=True,
            metadata={
                "open_kfid": parsed.open_kfid,
                "msgtype": parsed.msgtype,
                "send_time": parsed.send_time,
            },
        )
