"""The logs view: the log's last lines (gateway.ops.tail), as the log wrote
them, secrets masked; the page asks for the lines after the last one it
has, every two seconds while it is shown."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from aiohttp import web

from gateway.console.api import ConsoleError, Route, json_response
from gateway.ops.logging import redact_data
from gateway.ops.tail import LEVELS, MAX_READ, LogTail

__all__ = ["LogsView"]

DEFAULT_LIMIT: Final = 200
MAX_TEXT_CHARS: Final = 200


@dataclass(frozen=True, slots=True)
class LogsView:
    tail: LogTail

    def routes(self) -> Sequence[Route]:
        return [Route("GET", "/logs", self.logs)]

    async def logs(self, request: web.Request) -> web.StreamResponse:
        """?after=<seq>&level=<least level>&q=<text>&limit=<n ≤ MAX_READ>"""
        query = request.query
        after = _number(query.get("after"), "after", 0)
        limit = min(_number(query.get("limit"), "limit", DEFAULT_LIMIT), MAX_READ)
        level = query.get("level") or "debug"
        if level not in LEVELS:
            raise ConsoleError(400, f"level is one of {', '.join(LEVELS)}, not {level[:20]!r}")
        text = query.get("q", "")
        if len(text) > MAX_TEXT_CHARS:
            raise ConsoleError(400, f"q is over {MAX_TEXT_CHARS} characters")
        page = self.tail.read(after=after, level=level, text=text, limit=max(limit, 1))
        return json_response(
            {
                # what the log wrote is redacted already: once more, as the
                # rendered line is, in case a secret was registered since
                "events": [redact_data(event.as_dict()) for event in page.events],
                "last": page.last,
                "gap": page.gap,
            }
        )


def _number(raw: str | None, name: str, default: int) -> int:
    if raw is None or raw == "":
        return default
    if not raw.isascii() or not raw.isdigit() or len(raw) > 18:
        raise ConsoleError(400, f"{name} must be a whole number ≥ 0")
    return int(raw)
