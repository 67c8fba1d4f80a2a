"""The delivery view: the outbox by state with retry of a failed or parked
row, and each channel's readiness."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from aiohttp import web

from gateway.console.api import ConsoleError, Route, json_response
from storage.store import Store

__all__ = ["DeliveryView"]

PREVIEW_CHARS = 200


@dataclass(frozen=True, slots=True)
class DeliveryView:
    store: Store
    wake: Callable[[str], None]  # tell a channel's outbox sender to look again
    checks: Callable[[], list[tuple[str, str | None]]]  # readiness probes by name

    def routes(self) -> Sequence[Route]:
        return [
            Route("GET", "/outbox", self.outbox),
            Route("POST", r"/outbox/{row_id:\d+}/retry", self.retry, action="outbox.retry"),
            Route("GET", "/channels", self.channels),
        ]

    async def outbox(self, request: web.Request) -> web.StreamResponse:
        failed_only = request.query.get("failed") in ("1", "true")
        rows = await self.store.outbox_rows(failed_only=failed_only, limit=200)
        counts = await self.store.outbox_counts()
        return json_response(
            {
                "counts": counts,
                "rows": [
                    {
                        "id": r.id,
                        "channel": r.channel,
                        "chat_id": r.chat_id,
                        "state": r.state.value,
                        "attempts": r.attempts,
                        "last_error": r.last_error,
                        "created_at": r.created_at,
                        "preview": r.text[:PREVIEW_CHARS],
                    }
                    for r in rows
                ],
            }
        )

    async def retry(self, request: web.Request) -> web.StreamResponse:
        row_id = int(request.match_info["row_id"])
        channel = await self.store.retry_outbox(row_id)
        if channel is None:
            raise ConsoleError(409, f"outbox row {row_id} is not failed or parked")
        self.wake(channel)
        return json_response({"retried": row_id})

    async def channels(self, _request: web.Request) -> web.StreamResponse:
        checks = self.checks()
        return json_response(
            {
                "ready": all(reason is None for _, reason in checks),
                "checks": [{"name": n, "ok": r is None, "reason": r} for n, r in checks],
            }
        )
