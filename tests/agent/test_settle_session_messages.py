"""settle_session_messages: a note sent from inside a tool batch goes after the
batch's results; nothing else moves."""

from __future__ import annotations

from agent.messages import ChatMessage, Marker, Role, ToolCall, settle_session_messages


def note(text: str) -> ChatMessage:
    return ChatMessage(Role.ASSISTANT, text, marker=Marker.SESSION_MESSAGE.value)


def test_a_note_inside_a_batch_moves_after_its_results() -> None:
    a, b = ToolCall("a", "send_session_message", "{}"), ToolCall("b", "read", "{}")
    calls = ChatMessage(Role.ASSISTANT, tool_calls=(a, b))
    user, n = ChatMessage.user("q"), note("hi")
    ra, rb = ChatMessage.tool_result(a, "sent"), ChatMessage.tool_result(b, "text")
    reply = ChatMessage(Role.ASSISTANT, "done")
    settled = settle_session_messages([user, calls, n, ra, rb, reply])
    assert settled == [user, calls, ra, rb, n, reply]


def test_a_batch_left_without_results_releases_the_note_at_the_next_turn() -> None:
    a = ToolCall("a", "send_session_message", "{}")
    calls, n, user = ChatMessage(Role.ASSISTANT, tool_calls=(a,)), note("hi"), ChatMessage.user("2")
    assert settle_session_messages([calls, n, user]) == [calls, n, user]


def test_a_history_without_notes_is_returned_as_is() -> None:
    history = [ChatMessage.user("q"), ChatMessage(Role.ASSISTANT, "a")]
    assert settle_session_messages(history) is history
