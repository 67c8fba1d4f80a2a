"""A customer's send allowance: WeCom lets the company send 5 messages within
48 h of the customer's last message (errcode 95001 after that).

The channel counts, per customer, the parts sent since their last message
(channel state `allowance:<open_kfid>:<external_userid>`, durable): the
inbound side starts a new count when a customer message is recorded, the
sending side adds each part WeCom accepted. A reply that needs more parts
than are left is cut to what is left, its last part ending with `CUT_MARKER`,
so the customer sees that something is missing instead of losing the tail
silently (the model's words past the cut are not sent; docs/channels/wecom_kf.md).
"""

from __future__ import annotations

import json
from typing import Final

from channels.base import StateStore

__all__ = ["ALLOWANCE", "CUT_MARKER", "Allowance", "cut_to_allowance"]

ALLOWANCE: Final = 5  # messages per customer message (WeCom's rule)
# Shown to the customer (a WeChat user) at the end of the last part that fits.
CUT_MARKER: Final = "\n……（回复过长，其余内容未能发送；请再发一条消息继续）"


def _key(open_kfid: str, user: str) -> str:
    return f"allowance:{open_kfid}:{user}"


class Allowance:
    def __init__(self, state: StateStore) -> None:
        self._state = state

    async def _load(self, open_kfid: str, user: str) -> tuple[int, int]:
        """(the customer's last message's send_time, parts sent since)."""
        raw = await self._state.get(_key(open_kfid, user))
        try:
            stored = json.loads(raw) if raw else {}
            return int(stored.get("since", 0)), int(stored.get("sent", 0))
        except (ValueError, TypeError, AttributeError):
            return 0, 0

    async def customer_wrote(self, open_kfid: str, user: str, send_time: int) -> None:
        """A new message of theirs: the count starts again (an older one, replayed, does not)."""
        since, _ = await self._load(open_kfid, user)
        if send_time >= since:
            await self._state.set(
                _key(open_kfid, user), json.dumps({"since": send_time, "sent": 0})
            )

    async def left(self, open_kfid: str, user: str) -> int:
        _, sent = await self._load(open_kfid, user)
        return max(0, ALLOWANCE - sent)

    async def spent_one(self, open_kfid: str, user: str) -> None:
        since, sent = await self._load(open_kfid, user)
        await self._state.set(_key(open_kfid, user), json.dumps({"since": since, "sent": sent + 1}))


def cut_to_allowance(parts: list[str], left: int, max_bytes: int) -> list[str]:
    """`parts` if `left` suffices; else the first `left` parts, the last of
    them shortened so that it ends with CUT_MARKER within `max_bytes`. With
    nothing left, `parts` as they are: WeCom's refusal (95001) then says why."""
    if len(parts) <= left or left <= 0:
        return parts
    kept = parts[:left]
    room = max_bytes - len(CUT_MARKER.encode("utf-8"))
    last = kept[-1].encode("utf-8")[: max(0, room)].decode("utf-8", errors="ignore")
    kept[-1] = last.rstrip() + CUT_MARKER
    return kept
