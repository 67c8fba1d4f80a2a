"""Which parts of a reply Telegram already has: a retry resumes after them.

A reply of several parts (text parts, then files) stores the Telegram ids of
the parts delivered, in memory and in the channel state under
`progress:<outbox id>`, after each part but the last and again when it fails,
so the dispatcher's retry — also after a crash or SIGKILL — sends only the
rest. Telegram has no idempotency key to do this for us: a part whose send was
in flight when the process died (sent, but not yet recorded) goes again.
"""

from __future__ import annotations

import json

from channels.base import StateStore
from gateway.bus import OutboundMessage

__all__ = ["PartProgress"]

_PROGRESS_KEY = "progress:"


class PartProgress:
    def __init__(self, state: StateStore) -> None:
        self._state = state
        self._known: dict[int, list[int]] = {}  # outbox_id -> ids of parts already sent

    async def sent(self, message: OutboundMessage) -> list[int]:
        if message.outbox_id is None:
            return []
        if message.outbox_id in self._known:
            return self._known[message.outbox_id]
        if message.attempt <= 1:
            return []
        stored = await self._state.get(f"{_PROGRESS_KEY}{message.outbox_id}")
        return [int(i) for i in json.loads(stored)] if stored else []

    async def save(self, message: OutboundMessage, ids: list[int], previously: int) -> None:
        if message.outbox_id is None or len(ids) == previously:
            return
        self._known[message.outbox_id] = ids
        await self._state.set(f"{_PROGRESS_KEY}{message.outbox_id}", json.dumps(ids))

    async def clear(self, message: OutboundMessage) -> None:
        if message.outbox_id is not None:
            self._known.pop(message.outbox_id, None)
            await self._state.set(f"{_PROGRESS_KEY}{message.outbox_id}", "")
