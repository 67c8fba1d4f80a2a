"""The delivery view: the outbox by state, with retry and discard of a failed
or parked row; inbound dead letters, their payload redacted, with retry and
discard; each channel's health (connected, sending, its last failed and last
good send) and the gateway's readiness.

Every action goes through the function the CLI runs: `picobot outbox
retry|discard` (storage.sql.delivery.outbox), `picobot dead-letters
retry|discard` (the retry through the inbound processor, which also routes
the message at once: gateway.ingress). Nothing shown carries a secret: texts
and payloads pass the log redactor (gateway.ops.logging) before they are cut.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Protocol

import orjson
from aiohttp import web

from channels.base import Channel
from gateway.console.api import ConsoleError, Route, json_response
from gateway.delivery.outbound import SendingHealth
from gateway.ingress.inbound import InboundProcessor, NotRetried
from gateway.ops.logging import redact_data, redact_text
from storage.errors import StorageUnavailable
from storage.sql.delivery.dead_letters import DeadLetter
from storage.sql.delivery.inbox import dead_letter_message
from storage.sql.delivery.outbox import OutboxRow, OutboxState
from storage.store import Store

__all__ = ["DeliveryParts", "DeliveryView", "shown_payload"]

PREVIEW_CHARS: Final = 200
LETTER_PREVIEW: Final = 120  # a payload in the list (GET /dead-letters/{id}: all of it)
OUTBOX_LIMIT: Final = 200
LETTERS_LIMIT: Final = 50
_STATES: Final = ", ".join(s.value for s in OutboxState)


def shown_payload(payload: str, *, indent: bool = True) -> str:
    """A dead letter's payload as the console shows it: JSON (indented, or on
    one line) with the values of secret-looking keys masked; any text with
    registered secrets and credential patterns scrubbed (what the logs do)."""
    try:
        data = orjson.loads(payload)
    except orjson.JSONDecodeError:  # not JSON, or JSON that is not valid Unicode
        return redact_text(payload)
    if not isinstance(data, dict | list):
        return redact_text(payload)
    option = orjson.OPT_INDENT_2 if indent else None
    return orjson.dumps(redact_data(data), option=option).decode()


def _shown(text: str | None, limit: int | None = None) -> str | None:
    if text is None:
        return None
    masked = redact_text(text)  # whole, then cut: a secret cut in half is not found
    return masked if limit is None else masked[:limit]


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _iso(when: datetime | None) -> str | None:
    return when.isoformat() if when is not None else None


def _row(r: OutboxRow) -> dict[str, Any]:
    return {
        "id": r.id,
        "channel": r.channel,
        "chat_id": r.chat_id,
        "state": r.state.value,
        "attempts": r.attempts,
        "last_error": _shown(r.last_error),
        "created_at": r.created_at,
        "next_attempt_at": r.next_attempt_at,
        "preview": _shown(r.text, PREVIEW_CHARS),
    }


def _letter(d: DeadLetter, *, whole: bool) -> dict[str, Any]:
    payload = shown_payload(d.payload, indent=whole)
    return {
        "id": d.id,
        "channel": d.channel,
        "platform_id": _shown(d.platform_id),
        "reason": _shown(d.reason),
        "created_at": d.created_at,
        "truncated": d.truncated,
        "retryable": dead_letter_message(d) is not None,
        ("payload" if whole else "preview"): payload if whole else _cut(payload, LETTER_PREVIEW),
    }


def _id(request: web.Request, name: str) -> int:
    value = int(request.match_info[name])
    if value >= 2**63:  # past any database's integer: no such row
        raise ConsoleError(404, f"no row {value}")
    return value


class DeliveryParts(Protocol):
    """What the view takes from gateway.console.setup.ConsoleFeature."""

    @property
    def store(self) -> Store: ...
    @property
    def wake(self) -> Callable[[str], None]: ...
    @property
    def checks(self) -> Callable[[], list[tuple[str, str | None]]]: ...
    @property
    def channels(self) -> Sequence[Channel]: ...
    @property
    def sending_problem(self) -> Callable[[str], str | None]: ...
    @property
    def sending_health(self) -> Callable[[str], SendingHealth | None] | None: ...
    @property
    def inbound(self) -> InboundProcessor | None: ...


@dataclass(frozen=True, slots=True)
class DeliveryView:
    store: Store
    wake: Callable[[str], None]  # tell a channel's outbox sender to look again
    checks: Callable[[], list[tuple[str, str | None]]]  # readiness probes by name
    channels: Sequence[Channel] = ()
    sending_problem: Callable[[str], str | None] = lambda _channel: None
    # the dispatcher's per-channel sending (None: only `sending_problem` is known)
    health: Callable[[str], SendingHealth | None] | None = None
    # retries a dead letter and routes it (None: not running; retry refused)
    inbound: InboundProcessor | None = None

    @classmethod
    def of(cls, parts: DeliveryParts) -> DeliveryView:
        return cls(
            parts.store,
            parts.wake,
            parts.checks,
            parts.channels,
            parts.sending_problem,
            parts.sending_health,
            parts.inbound,
        )

    def routes(self) -> Sequence[Route]:
        row, letter = r"{row_id:\d+}", r"{letter_id:\d+}"
        return [
            Route("GET", "/outbox", self.outbox),
            Route("POST", f"/outbox/{row}/retry", self.retry, action="outbox.retry"),
            Route("POST", f"/outbox/{row}/discard", self.discard, action="outbox.discard"),
            Route("GET", "/dead-letters", self.dead_letters),
            Route("GET", f"/dead-letters/{letter}", self.dead_letter),
            Route(
                "POST",
                f"/dead-letters/{letter}/retry",
                self.retry_letter,
                action="dead_letter.retry",
            ),
            Route(
                "POST",
                f"/dead-letters/{letter}/discard",
                self.discard_letter,
                action="dead_letter.discard",
            ),
            Route("GET", "/channels", self.channel_health),
        ]

    # -- the outbox ----------------------------------------------------------------
    async def outbox(self, request: web.Request) -> web.StreamResponse:
        """?state=<one state>: its rows; else the rows not yet sent (?failed=1:
        the failed ones), as `picobot outbox list` shows them."""
        wanted = request.query.get("state")
        if wanted:
            try:
                state = OutboxState(wanted)
            except ValueError:
                raise ConsoleError(400, f"state must be one of {_STATES}") from None
            rows = await self.store.delivery.outbox_in_state(state, OUTBOX_LIMIT)
        else:
            failed_only = request.query.get("failed") in ("1", "true")
            rows = await self.store.outbox_rows(failed_only=failed_only, limit=OUTBOX_LIMIT)
        counts = await self.store.outbox_counts()
        return json_response(
            {"counts": counts, "state": wanted or None, "rows": [_row(r) for r in rows]}
        )

    async def retry(self, request: web.Request) -> web.StreamResponse:
        row_id = _id(request, "row_id")
        channel = await self.store.retry_outbox(row_id)
        if channel is None:
            raise ConsoleError(409, f"outbox row {row_id} is not failed or parked")
        self.wake(channel)
        return json_response({"retried": row_id})

    async def discard(self, request: web.Request) -> web.StreamResponse:
        row_id = _id(request, "row_id")
        channel = await self.store.delivery.discard_outbox(row_id)
        if channel is None:
            raise ConsoleError(409, f"outbox row {row_id} is not failed or parked")
        self.wake(channel)  # its chat no longer waits behind it
        return json_response({"discarded": row_id})

    # -- dead letters --------------------------------------------------------------
    async def dead_letters(self, request: web.Request) -> web.StreamResponse:
        """The newest dead letters (?channel= one channel's), payloads cut short."""
        channel = request.query.get("channel") or None
        letters = await self.store.dead_letters(LETTERS_LIMIT, channel)
        return json_response({"letters": [_letter(d, whole=False) for d in letters]})

    async def dead_letter(self, request: web.Request) -> web.StreamResponse:
        letter_id = _id(request, "letter_id")
        letter = await self.store.dead_letter(letter_id)
        if letter is None:
            raise ConsoleError(404, f"no dead letter {letter_id}")
        return json_response(_letter(letter, whole=True))

    async def retry_letter(self, request: web.Request) -> web.StreamResponse:
        letter_id = _id(request, "letter_id")
        if self.inbound is None:
            raise ConsoleError(503, "the gateway's inbound processor is not running")
        letter = await self.store.dead_letter(letter_id)
        if letter is None:
            raise ConsoleError(404, f"no dead letter {letter_id}")
        if letter.channel not in {c.name for c in self.channels}:
            raise ConsoleError(409, f"channel {letter.channel} is not enabled in this gateway")
        try:
            retried = await self.inbound.retry_dead_letter(letter_id)
        except NotRetried as exc:
            raise ConsoleError(409, str(exc)) from None
        except StorageUnavailable as exc:
            raise ConsoleError(503, f"storage is refusing writes for now: {exc.reason}") from None
        if retried is None:
            raise ConsoleError(404, f"no dead letter {letter_id}")
        return json_response(
            {
                "retried": letter_id,
                "inbox_id": retried.inbox_id,
                "duplicate": retried.inbox_id is None,
            }
        )

    async def discard_letter(self, request: web.Request) -> web.StreamResponse:
        letter_id = _id(request, "letter_id")
        if not await self.store.delivery.discard_dead_letter(letter_id):
            raise ConsoleError(404, f"no dead letter {letter_id}")
        return json_response({"discarded": letter_id})

    # -- channels ------------------------------------------------------------------
    async def channel_health(self, _request: web.Request) -> web.StreamResponse:
        checks = self.checks()
        return json_response(
            {
                "ready": all(reason is None for _, reason in checks),
                "checks": [{"name": n, "ok": r is None, "reason": _shown(r)} for n, r in checks],
                "channels": [self._channel(c) for c in self.channels],
            }
        )

    def _channel(self, channel: Channel) -> dict[str, Any]:
        health = self.health(channel.name) if self.health is not None else None
        problem = health.problem if health is not None else self.sending_problem(channel.name)
        return {
            "name": channel.name,
            "connected": channel.not_ready_reason is None,
            "reason": _shown(channel.not_ready_reason),
            "degraded": _shown(problem),
            "last_error": _shown(health.last_error if health is not None else None),
            "last_error_at": _iso(health.last_error_at) if health is not None else None,
            "last_sent_at": _iso(health.last_sent_at) if health is not None else None,
        }
