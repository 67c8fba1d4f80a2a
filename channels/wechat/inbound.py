"""Reading iLink `WeixinMessage`s: which to keep, their dedup key, text and quote.

Pure functions plus the in-memory replay guard; no I/O. getupdates is
at-least-once (replays seconds to tens of minutes later), so every message gets
a stable key — message_id, else client_id, else seq, else a hash of text and
create time — used as `InboundMessage.message_id` (the gateway's durable dedup)
and by `ReplayGuard` (kept ≥ 24 h, bounded).
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ParsedMessage", "ReplayGuard", "parse_message"]

MSG_TYPE_USER = 1
STATE_GENERATING = 1
ITEM_TEXT = 1
ITEM_IMAGE = 2
ITEM_VOICE = 3
ITEM_FILE = 4
ITEM_VIDEO = 5


@dataclass(frozen=True, slots=True)
class ParsedMessage:
    key: str
    user_id: str
    group_id: str
    context_token: str | None
    create_time_ms: int
    text: str
    reply_to: str | None
    media_items: list[dict[str, Any]] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)


def _present(value: Any) -> bool:
    return value not in (None, "", 0, "0")


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _item_text(item: dict[str, Any]) -> str:
    kind = item.get("type")
    if kind == ITEM_TEXT:
        return str((item.get("text_item") or {}).get("text") or "")
    if kind == ITEM_VOICE:
        voice = item.get("voice_item") or {}
        transcript = str(voice.get("text") or "").strip()
        if transcript or _voice_audio(item):
            return transcript  # no transcript: the audio goes to speech-to-text
        return "[voice message without transcript]"
    if kind == ITEM_VIDEO:
        return "[video]"
    return ""


def _voice_audio(item: dict[str, Any]) -> bool:
    """A voice item to download: WeChat sent no transcript of its own, and the
    audio is there (WeChat's transcript, when sent, is used instead)."""
    voice = item.get("voice_item")
    if item.get("type") != ITEM_VOICE or not isinstance(voice, dict):
        return False
    return not str(voice.get("text") or "").strip() and isinstance(voice.get("media"), dict)


def _is_media(item: dict[str, Any]) -> bool:
    return item.get("type") in (ITEM_IMAGE, ITEM_FILE, ITEM_VIDEO) or _voice_audio(item)


def _quote(items: list[dict[str, Any]]) -> str | None:
    for item in items:
        ref = item.get("ref_msg")
        if not isinstance(ref, dict):
            continue
        quoted = ref.get("message_item")
        text = _item_text(quoted) if isinstance(quoted, dict) else ""
        return text or str(ref.get("title") or "") or None
    return None


def message_key(msg: dict[str, Any], text: str) -> str:
    if _present(msg.get("message_id")):
        return str(msg["message_id"])
    if _present(msg.get("client_id")):
        return f"client:{msg['client_id']}"
    if _present(msg.get("seq")):
        return f"seq:{msg['seq']}"
    digest = hashlib.sha256(f"{text}\x00{msg.get('create_time_ms')}".encode()).hexdigest()
    return f"hash:{digest[:32]}"


def parse_message(msg: dict[str, Any]) -> ParsedMessage | None:
    """None for what we do not process: bot messages and ones still generating."""
    if _int(msg.get("message_type")) != MSG_TYPE_USER:
        return None
    if _int(msg.get("message_state")) == STATE_GENERATING:
        return None
    user = str(msg.get("from_user_id") or "")
    if not user:
        return None
    raw_items = msg.get("item_list") or []
    items = [i for i in raw_items if isinstance(i, dict)] if isinstance(raw_items, list) else []
    text = "\n".join(t for t in (_item_text(i) for i in items) if t)
    token = msg.get("context_token")
    return ParsedMessage(
        key=message_key(msg, text),
        user_id=user,
        group_id=str(msg.get("group_id") or ""),
        context_token=str(token) if token else None,
        create_time_ms=_int(msg.get("create_time_ms")),
        text=text,
        reply_to=_quote(items),
        media_items=[i for i in items if _is_media(i)],
        metadata={
            k: msg[k]
            for k in ("seq", "message_id", "client_id", "session_id", "create_time_ms")
            if _present(msg.get(k))
        },
    )


class ReplayGuard:
    """Keys seen in the last `ttl` seconds (monotonic clock), at most `max_size`."""

    def __init__(self, ttl: float = 26 * 3600, max_size: int = 50_000) -> None:
        self._ttl = ttl
        self._max = max_size
        self._seen: OrderedDict[str, float] = OrderedDict()

    def __contains__(self, key: str) -> bool:
        seen_at = self._seen.get(key)
        return seen_at is not None and time.monotonic() - seen_at < self._ttl

    def add(self, key: str) -> None:
        now = time.monotonic()
        self._seen[key] = now
        self._seen.move_to_end(key)
        while self._seen:
            oldest, at = next(iter(self._seen.items()))
            if len(self._seen) <= self._max and now - at < self._ttl:
                break
            del self._seen[oldest]
