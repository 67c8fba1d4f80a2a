"""The latest `context_token` per WeChat user, kept durably in the channel state.

iLink hands a context_token with every inbound message and silently discards a
send that does not echo it, so the newest one per user is stored (runtime state
survives restarts) and replayed older messages never overwrite a newer token.
Tokens are opaque secrets-in-spirit: never logged.
"""

from __future__ import annotations

import json

from channels.base import StateStore

__all__ = ["ContextTokens"]

_PREFIX = "context_token:"


class ContextTokens:
    def __init__(self, state: StateStore) -> None:
        self._state = state
        self._cache: dict[str, tuple[str, int]] = {}

    async def _load(self, user_id: str) -> tuple[str, int] | None:
        cached = self._cache.get(user_id)
        if cached is not None:
            return cached
        raw = await self._state.get(_PREFIX + user_id)
        if not raw:
            return None
        try:
            data = json.loads(raw)
            entry = (str(data["token"]), int(data.get("ts", 0)))
        except (ValueError, KeyError, TypeError):
            return None
        self._cache[user_id] = entry
        return entry

    async def get(self, user_id: str) -> str | None:
        entry = await self._load(user_id)
        return entry[0] if entry else None

    async def remember(self, user_id: str, token: str, create_time_ms: int) -> None:
        """Store `token` unless a newer message already gave this user another one."""
        current = await self._load(user_id)
        if current is not None and (current[0] == token or current[1] > create_time_ms):
            return
        self._cache[user_id] = (token, create_time_ms)
        await self._state.set(_PREFIX + user_id, json.dumps({"token": token, "ts": create_time_ms}))
