"""The operator's reads of conversations (storage/sql/conversations/browse.py
through Store.transcripts) and archive/delete of a named session
(storage/sql/conversations/commands.py), on every backend: found by channel,
user and text with wildcards taken literally, a page at a time; a transcript
shows each message once across compactions; deleting a session takes its
sub-agents' transcripts."""

from __future__ import annotations

from agent.messages import ChatMessage, Marker, Role, ToolCall
from storage.database import Connection
from storage.sql.access import chat_owners
from storage.sql.conversations import messages, sessions
from storage.sql.conversations.browse import SessionQuery, TranscriptEntry, like_pattern
from storage.sql.conversations.compaction import commit_compaction
from storage.store import Store
from tests.storage.conftest import OpenStorage


def _fill(c: Connection) -> None:
    sessions.create_session(c, "telegram", "42", "telegram:42")
    messages.append_messages(c, "telegram:42", [ChatMessage.user("Price: 100% off_sale")])
    sessions.create_session(c, "websocket", "w1", "w1", title="Plans")
    messages.append_messages(c, "w1", [ChatMessage.user("plan a trip"), ChatMessage.system("x")])
    chat_owners.claim(c, "websocket", "w1", "token:alice")
    sessions.create_session(c, "websocket", "w2", "w2")
    messages.append_messages(
        c,
        "w2",
        [ChatMessage.system("100% secret prompt", Marker.AGENT_PROMPT), ChatMessage.user("hi")],
    )


async def test_sessions_are_found_by_channel_user_and_literal_text(
    open_storage: OpenStorage,
) -> None:
    async with open_storage() as db:
        await db.write(_fill)
        await db.write(lambda c: sessions.create_session(c, "subagent", "w1", "task:w1:c"))
        store = Store(db)

        async def ids(**query: object) -> list[str]:
            found = await store.transcripts.find_sessions(SessionQuery(**query))  # type: ignore[arg-type]
            return [r.record.id for r in found.rows]

        assert await ids() == ["w2", "w1", "telegram:42"]  # newest first, no sub-agents
        assert await ids(channel="subagent") == ["task:w1:c"]
        assert await ids(channel="websocket") == ["w2", "w1"]
        assert await ids(user="token:alice") == ["w1"]  # the chat's owner
        assert await ids(user="42") == ["telegram:42"]  # the chat id
        assert await ids(text="%") == ["telegram:42"]  # not the system prompt's
        assert await ids(text="_") == ["telegram:42"]
        assert await ids(text="OFF_SALE") == ["telegram:42"]
        assert await ids(text="plans") == ["w1"]  # the title
        assert await ids(text="100%", channel="websocket") == []

        first = await store.transcripts.find_sessions(SessionQuery(limit=2))
        assert [r.record.id for r in first.rows] == ["w2", "w1"]
        assert first.after is not None
        rest = await store.transcripts.find_sessions(SessionQuery(limit=2, after=first.after))
        assert [r.record.id for r in rest.rows] == ["telegram:42"]
        assert rest.after is None
        w1 = first.rows[1]
        assert (w1.current, w1.owner, w1.preview, w1.record.message_count) == (
            True,
            "token:alice",
            "plan a trip",
            2,
        )


def test_a_like_pattern_takes_wildcards_literally() -> None:
    assert like_pattern("A_b%c\\") == "%a\\_b\\%c\\\\%"


async def test_a_transcript_shows_each_message_once_across_compactions(
    open_storage: OpenStorage,
) -> None:
    call = ToolCall("c1", "read", "{}")
    early = [
        ChatMessage.system("prompt", Marker.AGENT_PROMPT),
        ChatMessage.user("one"),
        ChatMessage(Role.ASSISTANT, "", tool_calls=(call,)),
        ChatMessage.tool_result(call, "file"),
        ChatMessage(Role.ASSISTANT, "a"),
        ChatMessage.user("two"),
        ChatMessage(Role.ASSISTANT, "b"),
    ]
    summary = ChatMessage.system("[Compressed History] one", Marker.HISTORY_COMPACTION)

    def fill(c: Connection) -> None:
        sessions.create_session(c, "websocket", "c", "c")
        messages.append_messages(c, "c", early, "r1")
        kept = messages.load_segment(c, "c", 0)
        commit_compaction(c, "c", 0, [kept[0], summary, *kept[5:]], "2026-01-01T00:00:00+00:00")
        messages.append_messages(c, "c", [ChatMessage.user("three")], "r2")
        # a second compaction keeps the first summary: a copy, not shown twice
        kept = messages.load_segment(c, "c", 1)  # prompt, summary, two, b, three
        again = ChatMessage.system("[Compressed History] two", Marker.HISTORY_COMPACTION)
        commit_compaction(c, "c", 1, [*kept[:2], again, kept[4]], "2026-01-02T00:00:00+00:00")
        messages.append_messages(c, "c", [ChatMessage.user("four")], "r3")

    async with open_storage() as db:
        await db.write(fill)
        store = Store(db)
        shown = await store.transcripts.transcript("c")
        assert shown is not None
        assert [(e.message.content, e.segment) for e in shown.entries] == [
            ("prompt", 0),
            ("one", 0),
            ("", 0),
            ("file", 0),
            ("a", 0),
            ("two", 0),
            ("b", 0),
            ("[Compressed History] one", 1),
            ("three", 1),
            ("[Compressed History] two", 2),
            ("four", 2),
        ]
        assert shown.entries[2].message.tool_calls == (call,)
        assert shown.before is None
        assert shown.record.message_count == 5  # prompt, both summaries, three, four
        # page by page, the newest first: the same entries
        pages: list[TranscriptEntry] = []
        before = None
        while True:
            page = await store.transcripts.transcript("c", before, 3)
            assert page is not None
            pages = page.entries + pages
            if page.before is None:
                break
            before = page.before
        assert [e.message.seq for e in pages] == [e.message.seq for e in shown.entries]
        assert await store.transcripts.transcript("nope") is None


async def test_archive_and_delete_by_id_and_a_deleted_sessions_sub_agents(
    open_storage: OpenStorage,
) -> None:
    def fill(c: Connection) -> None:
        sessions.create_session(c, "websocket", "c", "c")
        sessions.create_session(c, "websocket", "c", "c#2")  # now the active one
        sessions.create_session(c, "subagent", "c", "task:c:x", activate=False)
        messages.append_messages(c, "task:c:x", [ChatMessage.user("child")])
        sessions.create_session(c, "websocket", "other", "other")

    async with open_storage() as db:
        await db.write(fill)
        store = Store(db)
        archived = await store.archive_session("websocket", "c", "c", "c")
        assert archived is not None
        assert (archived.old.id, archived.fresh) == ("c", None)  # not the active one
        assert await store.archive_session("websocket", "c", "c", "other") is None  # not its chat
        active = await store.active_session("websocket", "c")
        assert active is not None
        assert active.id == "c#2"

        deleted = await store.delete_session("websocket", "c", "c", None, "c")
        assert deleted is not None
        assert deleted.fresh is None
        assert await store.transcripts.session("c") is None
        assert await store.transcripts.session("task:c:x") is None  # its sub-agent's too
        assert await store.transcripts.session_messages("task:c:x") == []
        gone = await store.delete_session("websocket", "c", "c", None, "c#2")
        assert gone is not None
        assert gone.fresh is not None
        assert gone.fresh.id == "c#3"
