"""The WebSocket channel's read-only queries: a chat's sessions and a session's
history (docs/PROTOCOL.md, "Queries"), for clients such as the web UI.

The runtime answers them through `channels.base.ChatDirectory`
(gateway/web/directory.py implements it on storage); this module validates the query frames and shapes
the answers. It never changes anything: sessions are changed with the chat
commands (`/new`, `/use`, …) sent as messages, like in every other channel.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from channels.base import ChatDirectory, HistoryEntry

__all__ = ["MAX_HISTORY", "QUERY_TYPES", "QueryError", "answer_query"]

ID_PATTERN = r"^[A-Za-z0-9._:@/#-]{1,128}$"  # session ids add '#' to the chat id alphabet
MAX_HISTORY = 500


class QueryError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


QueryId = Annotated[str, Field(pattern=ID_PATTERN)]


class _Query(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")
    id: QueryId


class SessionsQuery(_Query):
    type: Literal["sessions"]


class HistoryQuery(_Query):
    type: Literal["history"]
    session_id: QueryId | None = None
    limit: int = Field(200, ge=1, le=MAX_HISTORY)


QUERY_TYPES = frozenset({"sessions", "history"})


def _parse(frame: dict[str, Any]) -> SessionsQuery | HistoryQuery:
    model = SessionsQuery if frame.get("type") == "sessions" else HistoryQuery
    try:
        return model.model_validate(frame)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "frame"
        raise QueryError("bad_frame", f"{frame.get('type')}.{where}: {first['msg']}") from None


async def answer_query(
    directory: ChatDirectory, chat_id: str, frame: dict[str, Any]
) -> dict[str, Any]:
    """The answer frame to a `sessions` or `history` query of `chat_id`'s client."""
    query = _parse(frame)
    if isinstance(query, SessionsQuery):
        listing = await directory.sessions(chat_id)
        return {
            "type": "sessions",
            "id": query.id,
            "active": listing.active,
            "sessions": [asdict(s) for s in listing.sessions],
        }
    history = await directory.history(chat_id, query.session_id, query.limit)
    if history is None:
        raise QueryError("not_found", f"no session {query.session_id!r} in this chat")
    return {
        "type": "history",
        "id": query.id,
        "session_id": history.session_id,
        "title": history.title,
        "more": history.more,
        "messages": [_entry(e) for e in history.entries],
    }


def _entry(entry: HistoryEntry) -> dict[str, Any]:
    out = asdict(entry)
    # keep frames small: leave out what a plain message does not have
    for key in ("tool_calls", "tool_call_id", "name"):
        if not out[key]:
            del out[key]
    return out
