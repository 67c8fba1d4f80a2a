"""The `kf/sync_msg` loop: pull what a callback announced, cursor moved only once durable.

A callback (or start-up) marks an account as pending with the callback's
token; one worker task pulls its pages in order. Every item of a page is
handled (recorded in the inbox or deliberately dropped) before the page's
`next_cursor` is stored, so a crash replays a page rather than losing it and
the msgid dedup makes the replay harmless. Loops while `has_more`. A failed
pull (or a bug while recording) is logged and retried after `sync_retry_secs`;
a token WeCom no longer accepts (it lives ~10 minutes) is dropped and the pull
goes on without one.
At start every known account is pulled once: what arrived while we were down.

An account's first pull (no stored cursor) starts at the oldest message of the
last 3 days. Those were sent before picobot answered this account, and staff
may have handled them: items sent before the channel started (less
`backlog_secs`) are skipped until the stream's end is reached, and how many is
logged. The cut-off is stored before the first page, so a drain interrupted by
a crash or a failed pull resumes with the same one.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from channels.base import StateStore
from channels.wecom_kf.api import KfApi, KfApiError, KfError
from channels.wecom_kf.config import WecomKfConfig
from gateway.bus import BusClosed

__all__ = ["KfSyncer", "cursor_key"]

log = structlog.get_logger("channels.wecom_kf")

_KFIDS_KEY = "open_kfids"
_TOKEN_TTL_SECS = 600.0  # a callback token is valid for about 10 minutes
_DRAINED = "drained"  # an account's first pull reached the stream's end


def cursor_key(open_kfid: str) -> str:
    return f"cursor:{open_kfid}"


def _token_key(open_kfid: str) -> str:
    return f"callback_token:{open_kfid}"


def _backlog_key(open_kfid: str) -> str:
    return f"backlog_before:{open_kfid}"


class KfSyncer:
    def __init__(
        self,
        config: WecomKfConfig,
        api: KfApi,
        state: StateStore,
        handle: Callable[[dict[str, Any]], Awaitable[None]],
        set_status: Callable[[str | None], None],
    ) -> None:
        self._config = config
        self._api = api
        self._state = state
        self._handle = handle
        self._set_status = set_status
        # Pending accounts → the newest callback token (None: pull without one).
        # Bounded by the corp's accounts: only signed callbacks add to it.
        self._pending: dict[str, str | None] = {}
        self._wake = asyncio.Event()
        self._known: set[str] = set(config.open_kfids)
        self._started_at = time.time()

    async def load(self) -> None:
        """Mark every known account pending, with its stored token if still fresh."""
        raw = await self._state.get(_KFIDS_KEY)
        try:
            stored = json.loads(raw) if raw else []
        except ValueError:
            stored = []
        self._known.update(str(k) for k in stored if isinstance(k, str))
        for kfid in sorted(self._known):
            self._pending[kfid] = await self._stored_token(kfid)
        if self._pending:
            self._wake.set()

    async def notice(self, open_kfid: str, token: str) -> None:
        """A callback said messages wait: store the token (durable), wake the worker."""
        await self._state.set(
            _token_key(open_kfid), json.dumps({"token": token, "at": time.time()})
        )
        if open_kfid not in self._known:
            self._known.add(open_kfid)
            await self._state.set(_KFIDS_KEY, json.dumps(sorted(self._known)))
        self._pending[open_kfid] = token
        self._wake.set()

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._pending:
                kfid, token = next(iter(self._pending.items()))
                del self._pending[kfid]
                try:
                    await self._sync(kfid, token)
                except BusClosed:
                    log.info("wecom_kf syncer stopped: the gateway is shutting down")
                    return
                except KfError as exc:
                    log.warning("wecom_kf: sync_msg failed; retrying", error=str(exc))
                    await self._retry_later(kfid, token, f"WeCom kf/sync_msg failing: {exc}")
                except Exception as exc:  # a bug or an answer we cannot read: go on
                    log.exception("wecom_kf: sync failed; retrying")
                    await self._retry_later(
                        kfid, token, f"wecom_kf sync failed: {type(exc).__name__}"
                    )

    async def _retry_later(self, kfid: str, token: str | None, reason: str) -> None:
        self._set_status(reason)
        self._pending.setdefault(kfid, token)
        await asyncio.sleep(self._config.sync_retry_secs)

    async def _sync(self, kfid: str, token: str | None) -> None:
        stored = await self._state.get(cursor_key(kfid))
        cursor = stored or ""
        before = await self._backlog_cutoff(kfid, first=stored is None)
        skipped = 0
        while True:
            try:
                page = await self._api.sync_msg(
                    cursor=cursor, token=token, open_kfid=kfid, limit=self._config.sync_limit
                )
            except KfApiError:
                if token is None:
                    raise
                log.info("wecom_kf: callback token refused; pulling without it")
                token = None
                continue
            self._set_status(None)
            for item in page.msgs:
                if before is not None and _sent_before(item, before):
                    skipped += 1
                    continue
                await self._handle(item)
            if page.next_cursor and page.next_cursor != cursor:
                cursor = page.next_cursor
                await self._state.set(cursor_key(kfid), cursor)
            if not page.has_more:
                if before is not None:
                    await self._state.set(_backlog_key(kfid), _DRAINED)  # answer all from now
                    log.info(
                        "wecom_kf: first pull of an account; older messages skipped",
                        skipped=skipped,
                        backlog_secs=self._config.backlog_secs,
                    )
                return

    async def _backlog_cutoff(self, kfid: str, *, first: bool) -> int | None:
        """The send time before which items are skipped while this account's
        first drain lasts; None once it is over (or for an account whose
        cursor predates this rule)."""
        stored = await self._state.get(_backlog_key(kfid))
        if stored == _DRAINED or (stored is None and not first):
            return None
        if stored:
            return int(stored)
        cutoff = math.floor(self._started_at - self._config.backlog_secs)
        await self._state.set(_backlog_key(kfid), str(cutoff))
        return cutoff

    async def _stored_token(self, kfid: str) -> str | None:
        raw = await self._state.get(_token_key(kfid))
        try:
            stored = json.loads(raw) if raw else None
            if isinstance(stored, dict) and time.time() - float(stored["at"]) < _TOKEN_TTL_SECS:
                return str(stored["token"])
        except (ValueError, KeyError, TypeError):
            pass
        return None


def _sent_before(item: dict[str, Any], cutoff: int) -> bool:
    """An item whose send_time is before `cutoff`; one without a readable
    send_time is not skipped (the handler dead-letters what it cannot read)."""
    try:
        return int(item.get("send_time") or cutoff) < cutoff
    except (TypeError, ValueError):
        return False
