"""Reading `kf/sync_msg` items and callback XML: pure functions, no I/O.

A sync_msg item is `{msgid, open_kfid, external_userid, send_time, origin,
msgtype, <msgtype>: {...}}`. Only `origin` 3 (the WeChat customer) becomes a
turn; 4 (system events) and 5 (a human servicer writing from the WeCom app)
are deliberately not answered. Text, image, voice, video and file are read;
other types (location, link, business card, mini program, menu) become a short
text note so the customer still gets an answer. Events (`enter_session`,
`msg_send_fail`, …) are returned as `KfEvent`s for the channel to log.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any
from xml.etree import ElementTree

__all__ = [
    "CallbackNotice",
    "KfEvent",
    "KfMessage",
    "MalformedItem",
    "MediaItem",
    "Origin",
    "parse_item",
    "parse_xml",
]

MEDIA_TYPES = ("image", "voice", "video", "file")


class MalformedItem(ValueError):
    """A sync_msg item or callback body we cannot read."""


class Origin(IntEnum):
    CUSTOMER = 3
    SYSTEM = 4
    SERVICER = 5


@dataclass(frozen=True, slots=True)
class MediaItem:
    kind: str  # image | voice | video | file
    media_id: str


@dataclass(frozen=True, slots=True)
class KfMessage:
    msgid: str
    open_kfid: str
    external_userid: str
    send_time: int
    origin: int
    msgtype: str
    text: str
    media: MediaItem | None = None


@dataclass(frozen=True, slots=True)
class KfEvent:
    msgid: str
    open_kfid: str
    event_type: str
    external_userid: str
    details: dict[str, str]


@dataclass(frozen=True, slots=True)
class CallbackNotice:
    """The decrypted callback: `kf_msg_or_event` says messages are waiting."""

    event: str
    token: str
    open_kfid: str


def _str(value: Any) -> str:
    return "" if value is None else str(value)


def _note(msgtype: str, body: dict[str, Any]) -> str:
    if msgtype == "location":
        name = _str(body.get("name")) or _str(body.get("address"))
        where = f"{body.get('latitude')},{body.get('longitude')}"
        return f"[location: {name} ({where})]" if name else f"[location: {where}]"
    if msgtype == "link":
        return f"[link: {_str(body.get('title'))} {_str(body.get('url'))}]".strip()
    if msgtype == "miniprogram":
        return f"[mini program: {_str(body.get('title'))}]"
    if msgtype == "business_card":
        return "[business card]"
    if msgtype == "msgmenu":
        return _str(body.get("head_content")) or "[menu]"
    return f"[{msgtype} message]"


def parse_item(item: dict[str, Any]) -> KfMessage | KfEvent:
    msgid = _str(item.get("msgid"))
    msgtype = _str(item.get("msgtype"))
    if not msgid or not msgtype:
        raise MalformedItem("sync_msg item without msgid or msgtype")
    body = item.get(msgtype)
    body = body if isinstance(body, dict) else {}
    if msgtype == "event":
        return KfEvent(
            msgid=msgid,
            open_kfid=_str(body.get("open_kfid") or item.get("open_kfid")),
            event_type=_str(body.get("event_type")),
            external_userid=_str(body.get("external_userid") or item.get("external_userid")),
            details={k: _str(v) for k, v in body.items() if not isinstance(v, dict | list)},
        )
    user = _str(item.get("external_userid"))
    kfid = _str(item.get("open_kfid"))
    if not user or not kfid:
        raise MalformedItem("sync_msg message without external_userid or open_kfid")
    try:
        origin = int(item.get("origin") or 0)
        send_time = int(item.get("send_time") or 0)
    except (TypeError, ValueError):
        raise MalformedItem("sync_msg message with a non-numeric origin or send_time") from None
    media: MediaItem | None = None
    if msgtype == "text":
        text = _str(body.get("content"))
    elif msgtype in MEDIA_TYPES:
        media_id = _str(body.get("media_id"))
        if not media_id:
            raise MalformedItem(f"sync_msg {msgtype} message without media_id")
        media = MediaItem(msgtype, media_id)
        text = ""
    else:
        text = _note(msgtype, body)
    return KfMessage(msgid, kfid, user, send_time, origin, msgtype, text, media)


def parse_xml(raw: bytes | str, *fields: str) -> dict[str, str]:
    """The named child elements of a flat `<xml>` document (missing ones: "")."""
    try:
        root = ElementTree.fromstring(raw)  # expat: no external entities
    except ElementTree.ParseError as exc:
        raise MalformedItem("body is not XML") from exc
    return {name: (root.findtext(name) or "").strip() for name in fields}
