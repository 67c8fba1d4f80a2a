"""The latest `context_token` per WeChat user: kept, refreshed, budgeted, restricted.

iLink hands a context_token with every inbound message and silently discards a
send that does not echo it, so the newest one per user is stored (runtime state
survives restarts) and replayed older messages never overwrite a newer token.

The server also expires a token after roughly 90–160 s and limits how many
sends one token may carry. So a token older than `refresh_after_secs`, or one
that has carried `max_sends` sends, is exchanged for a fresh one through
`getconfig` (which answers a new context_token with the typing ticket) before
the next send. When iLink still refuses (`ret -2`, "context restricted") the
user is marked restricted until their next message brings a new token: the
channel parks the reply rather than retrying into the same refusal.

Tokens are opaque secrets-in-spirit: never logged.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from channels.base import StateStore
from channels.wechat.api import ILinkClient, ILinkConfig, ILinkError

__all__ = ["ContextTokens"]

log = structlog.get_logger("picobot.channels.wechat")

_PREFIX = "context_token:"
_RESTRICTED = "context_restricted:"


@dataclass(slots=True)
class _Entry:
    token: str
    ts: int  # create_time_ms of the message that brought it (0: from getconfig)
    obtained_at: float  # wall clock, seconds: when we got it
    sends: int = 0  # sends it carried (in memory: a restart starts the count again)


class ContextTokens:
    def __init__(
        self,
        state: StateStore,
        *,
        refresh_after_secs: float = 60.0,
        max_sends: int = 10,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._state = state
        self._refresh_after = refresh_after_secs
        self._max_sends = max_sends
        self._clock = clock
        self._cache: dict[str, _Entry] = {}
        self._restricted: dict[str, bool] = {}

    async def _load(self, user_id: str) -> _Entry | None:
        cached = self._cache.get(user_id)
        if cached is not None:
            return cached
        raw = await self._state.get(_PREFIX + user_id)
        if not raw:
            return None
        try:
            data = json.loads(raw)
            ts = int(data.get("ts", 0))
            # a token stored before `at` was kept: its age is unknown, so it is old
            entry = _Entry(str(data["token"]), ts, float(data.get("at", 0.0)))
        except (ValueError, KeyError, TypeError):
            return None
        self._cache[user_id] = entry
        return entry

    async def _store(self, user_id: str, entry: _Entry) -> None:
        self._cache[user_id] = entry
        value = {"token": entry.token, "ts": entry.ts, "at": entry.obtained_at}
        await self._state.set(_PREFIX + user_id, json.dumps(value))

    async def get(self, user_id: str) -> str | None:
        entry = await self._load(user_id)
        return entry.token if entry else None

    async def remember(self, user_id: str, token: str, create_time_ms: int) -> bool:
        """Store `token` unless a newer message already gave this user another
        one; True when it was stored (the user wrote again: a restriction ends)."""
        current = await self._load(user_id)
        if current is not None and (current.token == token or current.ts > create_time_ms):
            return False
        await self._store(user_id, _Entry(token, create_time_ms, self._clock()))
        return True

    async def config(self, client: ILinkClient, user_id: str) -> ILinkConfig:
        """`getconfig` with the user's token; a fresh context_token in the
        answer replaces it (every caller, typing included, must keep it: the
        server may now expect the new one)."""
        entry = await self._load(user_id)
        answer = await client.get_config(user_id, entry.token if entry else None)
        if answer.context_token and (entry is None or answer.context_token != entry.token):
            ts = entry.ts if entry is not None else 0
            await self._store(user_id, _Entry(answer.context_token, ts, self._clock()))
        return answer

    async def for_send(self, client: ILinkClient, user_id: str) -> str | None:
        """The token to send with: refreshed first when it is old or used up.
        A refresh that fails leaves the token we have (the send may still pass)."""
        entry = await self._load(user_id)
        if entry is None:
            return None
        stale = self._clock() - entry.obtained_at >= self._refresh_after
        if stale or entry.sends >= self._max_sends:
            try:
                await self.config(client, user_id)
            except (ILinkError, TimeoutError) as exc:
                log.info("wechat context token refresh failed", channel="wechat", error=str(exc))
        return await self.get(user_id)

    def sent(self, user_id: str) -> None:
        """One send carried the user's current token."""
        entry = self._cache.get(user_id)
        if entry is not None:
            entry.sends += 1

    async def restrict(self, user_id: str) -> None:
        """iLink refused sends to this user until they write again."""
        self._restricted[user_id] = True
        await self._state.set(_RESTRICTED + user_id, "1")

    async def release(self, user_id: str) -> bool:
        """The user wrote again: True if they were restricted (parked replies may go)."""
        restricted = self._restricted.get(user_id)
        if restricted is None:
            restricted = bool(await self._state.get(_RESTRICTED + user_id))
        if restricted:
            await self._state.set(_RESTRICTED + user_id, "")
        self._restricted[user_id] = False
        return restricted
