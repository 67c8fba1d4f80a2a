"""`StoreReplyArchive`: the API channel's `ReplyArchive` on storage.

A reply is the last outbox row of the channel that answers a message id
(storage.sql.delivery.outbox.reply_of), whatever its state: the answer of a
request whose client left, or of a turn recovered after a restart, is still
there for the retry or the fetch. The turn's tokens come from the usage log
(storage.sql.spend.run_tokens).
"""

from __future__ import annotations

from channels.base import StoredReply
from gateway.bus import FAILED_TURN
from storage.store import Store

__all__ = ["StoreReplyArchive"]


class StoreReplyArchive:
    def __init__(self, store: Store, channel: str) -> None:
        self.store = store
        self.channel = channel

    async def reply(self, chat_id: str, message_id: str) -> StoredReply:
        known, text, metadata = await self.store.reply_of(self.channel, chat_id, message_id)
        if text is None:
            return StoredReply(known)
        run_id = metadata.get("run_id")
        usage = await self.usage(run_id) if isinstance(run_id, str) else None
        failed = all(metadata.get(k) == v for k, v in FAILED_TURN.items())
        return StoredReply(True, text, failed, run_id, usage, metadata)

    async def usage(self, run_id: str) -> tuple[int, int] | None:
        return await self.store.spend.run_tokens(run_id)

    async def chats(self, channel: str, prefix: str) -> list[str]:
        return await self.store.chats_with_prefix(channel, prefix)
