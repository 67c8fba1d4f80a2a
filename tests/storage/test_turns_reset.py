"""`begin_turn` with a session reset: archive, replace and tell, in one commit."""

from __future__ import annotations

from datetime import UTC, datetime

from agent.messages import ChatMessage, Role
from gateway.bus import InboundMessage
from storage.database import Connection
from storage.sql.conversations import messages, sessions
from storage.sql.conversations.turns import Begun, Opening, SessionReset, begin_turn
from storage.sql.delivery import inbox
from tests.storage.conftest import OpenStorage

NOTICE = "New session."
OLD = "2025-06-01T03:00:00.000000+00:00"
RESET = SessionReset(datetime(2025, 6, 1, 4, 0, tzinfo=UTC), NOTICE)


def opening(inbox_id: int, reset: SessionReset | None, session_id: str | None = None) -> Opening:
    new = () if session_id else (ChatMessage.user("hello again"),)
    return Opening("telegram", "42", "telegram:42", session_id, False, new, (inbox_id,), "r", reset)


def seed(c: Connection) -> int:
    sessions.create_session(c, "telegram", "42", "telegram:42")
    messages.append_messages(
        c, "telegram:42", [ChatMessage.user("hi"), ChatMessage(Role.ASSISTANT, "hello")]
    )
    c.execute("UPDATE sessions SET updated_at = ?", (OLD,))  # last active at 03:00
    row = inbox.record_inbound(c, InboundMessage("telegram", "42", "u", "hello again", "m1"))
    assert row is not None
    return row


async def test_an_idle_session_is_archived_and_replaced_with_a_notice(
    open_storage: OpenStorage,
) -> None:
    async with open_storage() as db:
        inbox_id = await db.write(seed)
        begun: Begun = await db.write(lambda c: begin_turn(c, opening(inbox_id, RESET)))
        rows = await db.read(
            lambda c: c.execute("SELECT id, status FROM sessions ORDER BY id").fetchall()
        )
        queued = await db.read(lambda c: c.execute("SELECT * FROM outbox").fetchall())
        started = await db.read(
            lambda c: c.execute("SELECT state, session_id FROM inbox").fetchone()
        )
    assert begun.archived is not None
    assert begun.archived.id == "telegram:42"
    assert begun.record.id == "telegram:42#2"
    assert [m.content for m in begun.history] == ["hello again"]  # nothing earlier
    assert [(r["id"], r["status"]) for r in rows] == [
        ("telegram:42", "archived"),
        ("telegram:42#2", "active"),
    ]
    assert begun.notice is not None
    message, row_id = begun.notice
    assert [(r["id"], r["text"], r["session_id"]) for r in queued] == [
        (row_id, NOTICE, "telegram:42#2")
    ]
    assert message.metadata == {}  # not tied to the turn's streamed message
    assert (started["state"], started["session_id"]) == ("started", "telegram:42#2")


async def test_a_session_active_since_the_cutoff_goes_on(open_storage: OpenStorage) -> None:
    async with open_storage() as db:
        inbox_id = await db.write(seed)
        early = SessionReset(datetime(2025, 6, 1, 2, 0, tzinfo=UTC), NOTICE)
        begun: Begun = await db.write(lambda c: begin_turn(c, opening(inbox_id, early)))
        queued = await db.read(lambda c: c.execute("SELECT COUNT(*) FROM outbox").fetchone()[0])
    assert (begun.record.id, begun.archived, begun.notice, queued) == ("telegram:42", None, None, 0)
    assert [m.content for m in begun.history] == ["hi", "hello", "hello again"]


async def test_a_session_without_messages_and_a_resumed_turn_are_never_replaced(
    open_storage: OpenStorage,
) -> None:
    async with open_storage() as db:
        inbox_id = await db.write(seed)
        resumed: Begun = await db.write(
            lambda c: begin_turn(c, opening(inbox_id, RESET, session_id="telegram:42"))
        )
        assert (resumed.record.id, resumed.archived) == ("telegram:42", None)

        def empty(c: Connection) -> None:
            sessions.create_next_session(c, "telegram", "42", "telegram:42")
            c.execute("UPDATE sessions SET updated_at = ?", (OLD,))

        await db.write(empty)
        begun: Begun = await db.write(lambda c: begin_turn(c, opening(inbox_id, RESET)))
    assert (begun.record.id, begun.archived) == ("telegram:42#2", None)
