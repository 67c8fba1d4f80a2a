"""Child sessions (storage/sql/conversations/subagents.py through Store.transcripts): opened once,
resumed from what they stored, closed without a dangling call."""

from __future__ import annotations

from agent.messages import CANCELLED_RESULT, INTERRUPTED_RESULT, ChatMessage, Marker, Role, ToolCall
from storage.store import Store
from tests.storage.conftest import OpenStorage

FIRST = [ChatMessage.system("t", Marker.SUBAGENT_PROMPT), ChatMessage.user("d")]


async def test_a_child_is_resumed_or_found_finished(open_storage: OpenStorage) -> None:
    async with open_storage() as db:
        store = Store(db)
        opened = await store.transcripts.open_child("task:p:c", "p", "d", FIRST, "r1")
        assert (opened.resumed, opened.finished, len(opened.history)) == (False, None, 2)
        call = ToolCall("x", "read", "{}")
        await store.append_turn(
            "task:p:c", "r1", [ChatMessage(Role.ASSISTANT, tool_calls=(call,))], None
        )
        again = await store.transcripts.open_child("task:p:c", "p", "d", FIRST, "r2")
        assert again.resumed
        assert again.finished is None
        assert [m.role for m in again.history] == [
            Role.SYSTEM,
            Role.USER,
            Role.ASSISTANT,
            Role.TOOL,
        ]
        assert again.history[-1].content == INTERRUPTED_RESULT  # not the first messages twice
        await store.append_turn("task:p:c", "r2", [ChatMessage(Role.ASSISTANT, "done")], None)
        done = await store.transcripts.open_child("task:p:c", "p", "d", FIRST, "r3")
        assert done.finished == "done"
        [child] = await store.transcripts.children_of("p")
        assert (child.id, child.channel, child.chat_id) == ("task:p:c", "subagent", "p")
        assert await store.active_session("subagent", "p") is None  # bound to no chat


async def test_closing_answers_dangling_calls_and_says_how_it_ended(
    open_storage: OpenStorage,
) -> None:
    async with open_storage() as db:
        store = Store(db)
        await store.transcripts.open_child("task:p:c", "p", "d", FIRST, "r1")
        call = ToolCall("x", "bash", "{}")
        await store.append_turn(
            "task:p:c", "r1", [ChatMessage(Role.ASSISTANT, tool_calls=(call,))], None
        )
        await store.transcripts.close_child("task:p:c", "r1", "[timed out after 5s]")
        history = await store.transcripts.session_messages("task:p:c")
    assert [(m.role, m.content) for m in history[-2:]] == [
        (Role.TOOL, CANCELLED_RESULT),
        (Role.ASSISTANT, "[timed out after 5s]"),
    ]
