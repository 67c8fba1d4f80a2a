"""The conversations view: every chat across channels, found by channel,
user and text a page at a time; a session's whole transcript (tool calls
with their results, its sub-agents' transcripts, compactions marked), a page
at a time; archive and delete of a session.

Archive and delete go through the chat commands' own code
(`SessionCommands.archive_session`, `delete_session`: /archive, /delete) and
are refused, as there, while the chat has a turn running or waiting for an
approval. A sub-agent's transcript belongs to its parent session: it is
read, never archived or deleted on its own (deleting the parent deletes it).

Texts are shown as stored, with registered secrets and credential patterns
masked (`redact_text`), cut at a length for display.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any, Final

import orjson
from aiohttp import web

from agent.messages import Marker, Role
from agent.subagents.types import child_session_id
from gateway.console.api import ConsoleError, Route, json_response
from gateway.i18n import Locale, tr
from gateway.ops.logging import redact_text
from gateway.sessions.commands import SessionBusy, SessionCommands
from storage.sql.conversations.browse import (
    MAX_PAGE,
    MAX_QUERY_CHARS,
    MAX_ROWS,
    SessionQuery,
    SessionRow,
    TranscriptEntry,
)
from storage.sql.conversations.commands import Replaced
from storage.sql.conversations.sessions import SessionRecord, SessionStatus
from storage.sql.conversations.subagents import CHILD_CHANNEL
from storage.store import Store

__all__ = ["ConversationsView"]

PAGE: Final = 50  # sessions in a page unless asked
TRANSCRIPT_PAGE: Final = 200  # messages in a transcript page unless asked
FIELD_CHARS: Final = 4_000  # of a tool call's arguments or a reasoning shown
MAX_FILTER_CHARS: Final = 200  # of a channel or user filter


@dataclass(frozen=True, slots=True)
class ConversationsView:
    store: Store
    sessions: SessionCommands | None  # None: no runtime to act through (read-only)

    def routes(self) -> Sequence[Route]:
        one = "/conversations/{session:.+}"
        return [
            Route("GET", "/conversations", self.find),
            Route("GET", one, self.transcript),
            Route("POST", one + "/archive", self.archive, action="conversations.archive"),
            Route("DELETE", one, self.delete, action="conversations.delete"),
        ]

    async def find(self, request: web.Request) -> web.StreamResponse:
        query = request.query
        text = _filter(query, "q", MAX_QUERY_CHARS)
        found = await self.store.transcripts.find_sessions(
            SessionQuery(
                channel=_filter(query, "channel", MAX_FILTER_CHARS),
                user=_filter(query, "user", MAX_FILTER_CHARS),
                text=text,
                limit=_int(query, "limit", PAGE, 1, MAX_PAGE),
                after=_cursor(query.get("cursor")),
            )
        )
        return json_response(
            {
                "sessions": [_listed(row) for row in found.rows],
                "cursor": None if found.after is None else _encode(found.after),
            }
        )

    async def transcript(self, request: web.Request) -> web.StreamResponse:
        session_id = request.match_info["session"]
        before = request.query.get("before")
        if before is not None and not before.isdigit():
            raise ConsoleError(400, "before must be a message number (seq)")
        limit = _int(request.query, "limit", TRANSCRIPT_PAGE, 1, MAX_ROWS)
        found = await self.store.transcripts.transcript(
            session_id, int(before) if before is not None else None, limit
        )
        if found is None:
            raise ConsoleError(404, f"no session {session_id!r}")
        children = {c.id for c in found.children}
        return json_response(
            {
                "session": _session(found.record, found.current, found.owner),
                "entries": [_entry(e, session_id, children) for e in found.entries],
                "before": found.before,
                "children": [
                    _session(c, current=False, owner=None) | {"call_id": _call_of(c, session_id)}
                    for c in found.children
                ],
            }
        )

    async def archive(self, request: web.Request) -> web.StreamResponse:
        record, sessions = await self._target(request)
        if record.status is SessionStatus.ARCHIVED:
            raise ConsoleError(409, f"session {record.id!r} is already archived")
        change = sessions.archive_session(record.channel, record.chat_id, record.id)
        return await _replaced("archived", record, change)

    async def delete(self, request: web.Request) -> web.StreamResponse:
        record, sessions = await self._target(request)
        change = sessions.delete_session(record.channel, record.chat_id, session_id=record.id)
        return await _replaced("deleted", record, change)

    async def _target(self, request: web.Request) -> tuple[SessionRecord, SessionCommands]:
        """The session an action names, and what acts on it."""
        session_id = request.match_info["session"]
        if self.sessions is None:
            raise ConsoleError(503, "sessions cannot be changed here")
        record = await self.store.transcripts.session(session_id)
        if record is None:
            raise ConsoleError(404, f"no session {session_id!r}")
        if record.channel == CHILD_CHANNEL:
            raise ConsoleError(
                409,
                f"{session_id!r} is a sub-agent's transcript; it goes with its parent "
                f"session {record.chat_id!r}",
            )
        return record, self.sessions


def _filter(query: Mapping[str, str], name: str, most: int) -> str | None:
    value = query.get(name, "").strip()
    if len(value) > most:
        raise ConsoleError(400, f"{name} is over {most} characters")
    return value or None


def _int(query: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    raw = query.get(name)
    if raw is None or raw == "":
        return default
    if not raw.isdigit() or not low <= int(raw) <= high:
        raise ConsoleError(400, f"{name} must be a whole number from {low} to {high}")
    return int(raw)


def _encode(after: tuple[str, str]) -> str:
    return base64.urlsafe_b64encode(orjson.dumps(list(after))).decode().rstrip("=")


def _cursor(raw: str | None) -> tuple[str, str] | None:
    """The page a `cursor` (from a previous answer) starts after."""
    if not raw:
        return None
    try:
        value = orjson.loads(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
    except (binascii.Error, ValueError):
        raise ConsoleError(400, "cursor is not one this view gave") from None
    if not (isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value)):
        raise ConsoleError(400, "cursor is not one this view gave")
    return value[0], value[1]


def _session(record: SessionRecord, current: bool, owner: str | None) -> dict[str, Any]:
    return {
        "id": record.id,
        "channel": record.channel,
        "chat_id": record.chat_id,
        "title": redact_text(record.title) if record.title else record.title,
        "status": record.status.value,
        "current": current,
        "owner": owner,
        "message_count": record.message_count,
        "user_turns": record.user_turns,
        "segment": record.segment,
        "compacted_at": record.compacted_at,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
    }


def _listed(row: SessionRow) -> dict[str, Any]:
    preview = redact_text(row.preview) if row.preview else None
    return _session(row.record, row.current, row.owner) | {"preview": preview}


def _cut(text: str, most: int = FIELD_CHARS) -> tuple[str, bool]:
    text = redact_text(text)
    return (text, False) if len(text) <= most else (text[:most] + "…", True)


def _call_of(child: SessionRecord, parent_id: str) -> str | None:
    """The tool call a sub-agent's session ran in (`task:<parent>:<call id>`)."""
    prefix = child_session_id(parent_id, "")
    return child.id[len(prefix) :] if child.id.startswith(prefix) else None


def _entry(entry: TranscriptEntry, session_id: str, children: set[str]) -> dict[str, Any]:
    m = entry.message
    kind = m.role.value
    if m.marker == Marker.HISTORY_COMPACTION:
        kind = "compaction"
    text = redact_text(m.content)
    shown: dict[str, Any] = {
        "seq": m.seq,
        "segment": entry.segment,
        "kind": kind,  # user, assistant, tool, system or compaction
        "marker": m.marker,
        "failed": m.marker == Marker.FAILED_TURN,
        "text": text,
        "cut": entry.cut,
        "at": m.created_at.isoformat(),
        "run_id": entry.run_id,
        "media": [PurePath(p).name for p in m.media],
    }
    if m.role is Role.ASSISTANT:
        calls = []
        for call in m.tool_calls:
            arguments, cut = _cut(call.arguments)
            child = child_session_id(session_id, call.id)
            calls.append(
                {
                    "id": call.id,
                    "name": call.name,
                    "arguments": arguments,
                    "cut": cut,
                    "subagent": child if child in children else None,
                }
            )
        shown["tool_calls"] = calls
        shown["reasoning"] = _cut(m.reasoning_content)[0] if m.reasoning_content else None
    if m.role is Role.TOOL:
        shown["tool_call_id"] = m.tool_call_id
        shown["name"] = m.name
    return shown


async def _replaced(
    done: str, record: SessionRecord, change: Awaitable[Replaced | None]
) -> web.StreamResponse:
    """The answer to an archive or a delete (`done`) of `record`: the session
    gone and the chat's fresh one; 409 while its chat is busy, as in chat."""
    try:
        replaced = await change
    except SessionBusy as busy:
        raise ConsoleError(409, tr(Locale.EN, busy.reason)) from None
    if replaced is None:
        raise ConsoleError(404, f"no session {record.id!r}")
    fresh = replaced.fresh.id if replaced.fresh is not None else None
    return json_response({done: replaced.old.id, "fresh": fresh})
