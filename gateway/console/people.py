"""The people view: tool calls waiting for a yes, pairings, and one user's
memories, each read and changed through the code the chat commands and the
CLI use (no second implementation):

- approvals: the pending ones, answered with `Approvals.decide`, the move
  /approve, /deny and the WebSocket approve frame end in (`Approvals.answer`),
  recorded as decided by `console:<principal>`; an admin may answer any. The
  held calls are shown as the chat's request shows them (secrets masked).
- pairings: live codes and approved senders (`Store.list_pairings`, as
  /pair list and `picobot pairing list`); approve with `Store.approve_pairing`
  and the new user's notice in their channel's language, then the outbox woken
  (/pair approve); revoke with `Store.revoke_pairing` (/pair revoke,
  `picobot pairing revoke`).
- memories: the users `picobot memory list` shows (`MemoryStore.scopes`), a
  user's entries or a search of them (`picobot memory show|search`), one entry
  deleted (`picobot memory delete`, /forget NAMESPACE/KEY) or all of them
  (`forget_all`: /forget all, which also rewrites AGENT.md's block).

Every list is bounded; an unknown id or entry is 404, an approval answered
already or a code spent already is 409, an expired code 410.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from aiohttp import web

from gateway.access.pairing import approved_notice, parse_code, parse_who
from gateway.approvals.service import Approvals
from gateway.approvals.texts import shown_call
from gateway.bus import Decision
from gateway.clock import Clock
from gateway.config.loading import LoadedConfig
from gateway.console.api import ConsoleError, Route, json_response, principal_of, read_json
from gateway.i18n.locales import LocaleResolver
from gateway.memory.commands import forget_all
from gateway.memory.setup import MemoryFeature
from gateway.ops.logging import redact_text
from storage.clock import iso
from storage.sql.access.pairings import ApproveOutcome, Pairing, PairingState
from storage.sql.approvals import ApprovalRecord, ApprovalState
from storage.sql.memory.memories import MemoryRow, Scope
from storage.store import Store

__all__ = ["MAX_APPROVALS", "MAX_ENTRIES", "MAX_PAIRINGS", "MAX_USERS", "PeopleView"]

MAX_APPROVALS: Final = 100
MAX_PAIRINGS: Final = 200
MAX_USERS: Final = 500
MAX_ENTRIES: Final = 200  # a user's entries listed (the cap per user is 500)
MAX_SEARCH: Final = 50  # as `picobot memory search --limit`
MAX_REASON_CHARS: Final = 500
USER_KIND: Final = "user"


@dataclass(frozen=True, slots=True)
class PeopleView:
    store: Store
    approvals: Approvals
    loaded: LoadedConfig  # the language of a new user's notice, by channel
    wake: Callable[[str], None]  # tell a channel's outbox sender to look again
    clock: Clock
    memory: MemoryFeature | None = None  # AGENT.md's summary block, rewritten on forget

    def routes(self) -> Sequence[Route]:
        approval = r"/approvals/{approval_id:\d+}"
        sender = "/pairings/{channel}/{sender_id}"
        user = "/memories/{user}"
        return [
            Route("GET", "/approvals", self.pending),
            Route("POST", approval + "/approve", self.approve, action="approvals.approve"),
            Route("POST", approval + "/deny", self.deny, action="approvals.deny"),
            Route("GET", "/pairings", self.pairings),
            Route("POST", "/pairings/{code}/approve", self.pair, action="pairings.approve"),
            Route("POST", sender + "/revoke", self.revoke, action="pairings.revoke"),
            Route("GET", "/memories", self.users),
            Route("GET", user, self.memories),
            Route("DELETE", user + "/{namespace}/{key}", self.delete, action="memories.delete"),
            Route("DELETE", user, self.forget, action="memories.forget"),
        ]

    # -- approvals -----------------------------------------------------------------
    async def pending(self, request: web.Request) -> web.StreamResponse:
        limit = _limit(request, MAX_APPROVALS)
        records = await self.approvals.waiting(limit)
        return json_response({"approvals": [_approval(r) for r in records], "limit": limit})

    async def approve(self, request: web.Request) -> web.StreamResponse:
        return await self._decide(request, Decision.APPROVE, None)

    async def deny(self, request: web.Request) -> web.StreamResponse:
        body = await read_json(request)
        reason = body.get("reason")
        if reason is not None and not isinstance(reason, str):
            raise ConsoleError(400, "reason must be a string")
        reason = (reason or "").strip()[:MAX_REASON_CHARS] or None
        return await self._decide(request, Decision.DENY, reason)

    async def _decide(
        self, request: web.Request, decision: Decision, reason: str | None
    ) -> web.StreamResponse:
        approval_id = int(request.match_info["approval_id"])
        record = await self.store.approvals.get(approval_id)
        if record is None:
            raise ConsoleError(404, f"no approval {approval_id}")
        by = f"console:{principal_of(request).name}"
        if record.state is not ApprovalState.PENDING or not await self.approvals.decide(
            approval_id, decision, reason, by
        ):
            raise ConsoleError(409, f"approval {approval_id} was answered already")
        return json_response({"id": approval_id, "decision": decision.value, "decided_by": by})

    # -- pairings ------------------------------------------------------------------
    async def pairings(self, request: web.Request) -> web.StreamResponse:
        limit = _limit(request, MAX_PAIRINGS)
        found = await self.store.list_pairings(self.clock(), limit)
        pending = [_pairing(p) for p in found if p.state is PairingState.PENDING]
        approved = [_pairing(p) for p in found if p.state is PairingState.APPROVED]
        return json_response({"pending": pending, "approved": approved, "limit": limit})

    async def pair(self, request: web.Request) -> web.StreamResponse:
        given = request.match_info["code"]
        code = parse_code(given)
        if code is None:
            raise ConsoleError(400, f"{given!r} is not a pairing code (XXXX-XXXX)")
        by = f"console:{principal_of(request).name}"
        result = await self.store.approve_pairing(code, by, self.clock(), self._notice())
        match result.outcome:
            case ApproveOutcome.APPROVED:
                assert result.pairing is not None
                self.wake(result.pairing.channel)  # the new user's notice is in the outbox
                return json_response({"approved": _pairing(result.pairing)})
            case ApproveOutcome.ALREADY:
                who = result.pairing.who if result.pairing is not None else "that sender"
                raise ConsoleError(409, f"{who} is approved already (code {code})")
            case ApproveOutcome.EXPIRED:
                raise ConsoleError(410, f"code {code} has expired")
            case ApproveOutcome.UNKNOWN:
                raise ConsoleError(404, f"no pending pairing code {code}")

    async def revoke(self, request: web.Request) -> web.StreamResponse:
        channel, sender_id = request.match_info["channel"], request.match_info["sender_id"]
        if not await self.store.revoke_pairing(channel, sender_id, self.clock()):
            raise ConsoleError(404, f"{channel}:{sender_id} has no pairing to revoke")
        return json_response({"revoked": f"{channel}:{sender_id}"})

    def _notice(self) -> Callable[[str], str]:
        return approved_notice(LocaleResolver.from_config(self.loaded.config).for_channel)

    # -- memories ------------------------------------------------------------------
    async def users(self, request: web.Request) -> web.StreamResponse:
        limit = _limit(request, MAX_USERS)
        infos = await self.store.memories.scopes(limit)
        users = [
            {"user": i.scope.key, "entries": i.entries, "summary": bool(i.summary)}
            for i in infos
            if i.scope.kind == USER_KIND
        ]
        return json_response({"users": users, "limit": limit})

    async def memories(self, request: web.Request) -> web.StreamResponse:
        scope = _user(request)
        query = request.query.get("q", "").strip()
        memories = self.store.memories
        if query:
            limit = _limit(request, MAX_SEARCH)
            rows = await memories.search(scope, query[:200], None, limit)
        else:
            limit = _limit(request, MAX_ENTRIES)
            rows = await memories.entries(scope, None, limit)
        summary = await memories.summary(scope)
        return json_response(
            {
                "user": scope.key,
                "query": query or None,
                "entries": [_entry(r) for r in rows],
                "limit": limit,
                "summary": redact_text(summary) if summary else None,
            }
        )

    async def delete(self, request: web.Request) -> web.StreamResponse:
        scope = _user(request)
        namespace, key = request.match_info["namespace"], request.match_info["key"]
        if not await self.store.memories.delete(scope, namespace, key):
            raise ConsoleError(404, f"{scope.key} has no memory {namespace}/{key}")
        return json_response({"user": scope.key, "deleted": f"{namespace}/{key}"})

    async def forget(self, request: web.Request) -> web.StreamResponse:
        scope = _user(request)
        count = await self._forget_all()(scope)
        if not count:
            raise ConsoleError(404, f"{scope.key} has no memories")
        return json_response({"user": scope.key, "forgotten": count})

    def _forget_all(self) -> Callable[[Scope], Awaitable[int]]:
        if self.memory is None:  # no summary file to rewrite: as `picobot memory delete --all`
            return self.store.memories.forget
        return functools.partial(forget_all, self.store.memories, self.memory.summary_file)


def _limit(request: web.Request, most: int) -> int:
    """`?limit=` within 1..`most`; `most` when absent."""
    raw = request.query.get("limit")
    if raw is None:
        return most
    try:
        return max(1, min(int(raw), most))
    except ValueError:
        raise ConsoleError(400, f"limit must be a number, not {raw!r}") from None


def _user(request: web.Request) -> Scope:
    given = request.match_info["user"]
    if parse_who(given) is None:
        raise ConsoleError(400, f"{given!r} is not channel:sender_id")
    return Scope(USER_KIND, given.strip())


def _approval(r: ApprovalRecord) -> Mapping[str, Any]:
    held = set(r.held)
    return {
        "id": r.id,
        "chat": f"{r.channel}:{r.chat_id}",
        "asked_by": f"{r.channel}:{r.requester}",
        "session_id": r.session_id,
        "created_at": iso(r.created_at),
        "expires_at": iso(r.expires_at),
        "calls": [{"name": c.name, "shown": shown_call(c)} for c in r.calls if c.id in held],
    }


def _pairing(p: Pairing) -> Mapping[str, Any]:
    return {
        "who": p.who,
        "channel": p.channel,
        "sender_id": p.sender_id,
        "chat_id": p.chat_id,
        "state": p.state.value,
        "code": p.code if p.state is PairingState.PENDING else None,
        "created_at": iso(p.created_at),
        "expires_at": iso(p.expires_at),
        "approved_by": p.approved_by,
        "approved_at": iso(p.approved_at) if p.approved_at else None,
    }


def _entry(r: MemoryRow) -> Mapping[str, Any]:
    return {
        "namespace": r.namespace,
        "key": r.memory_key,
        "content": redact_text(r.content),
        "category": r.category,
        "source": r.source.source_type,
        "updated_at": r.updated_at,
    }
