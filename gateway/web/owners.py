"""`StoreChatOwners`: the WebSocket channel's `ChatOwners` on storage.

One channel's chat owners in the `chat_owners` table (storage/sql/access/chat_owners.py),
so a chat stays its principal's across reconnects and restarts. It records
and reads owners; who a principal is the channel decides.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from storage.store import Store

__all__ = ["StoreChatOwners"]


class StoreChatOwners:
    def __init__(self, store: Store, channel: str) -> None:
        self.store = store
        self.channel = channel

    async def claim(
        self, chat_id: str, principal: str, legacy_owner: Callable[[Sequence[str]], str]
    ) -> str:
        return await self.store.claim_chat(self.channel, chat_id, principal, legacy_owner)
