"""agent.window: every request fits the window, whatever the history holds."""

from __future__ import annotations

from agent.context import PreparedContext
from agent.messages import (
    ChatMessage,
    Marker,
    Role,
    ToolCall,
    message_chars,
    shared_prefix,
    tokens_for_chars,
)
from agent.providers.base import ToolSpec
from agent.window import fit, request_budget


def _turn(n: int, size: int = 400) -> list[ChatMessage]:
    call = ToolCall(f"call_{n}", "read", "{}")
    return [
        ChatMessage.user(f"question {n} " + "q" * size),
        ChatMessage(Role.ASSISTANT, "", tool_calls=(call,)),
        ChatMessage.tool_result(call, f"result {n} " + "r" * size),
        ChatMessage(Role.ASSISTANT, f"answer {n}"),
    ]


def _history(turns: int) -> list[ChatMessage]:
    out = [ChatMessage.system("persona", marker=Marker.AGENT_PROMPT)]
    out.append(ChatMessage.system("[Compressed History] earlier", Marker.HISTORY_COMPACTION))
    for n in range(turns):
        out.extend(_turn(n))
    return out


def _tokens(messages: list[ChatMessage]) -> int:
    return tokens_for_chars(sum(message_chars(m) for m in messages))


def test_a_request_within_the_budget_is_left_as_it_is() -> None:
    history = _history(3)
    head = [ChatMessage.system("operator")]
    assert fit(head, history[:-4], history[-4:], (), 10_000) == [*head, *history]


def test_the_oldest_whole_turns_go_first_and_the_pinned_messages_stay() -> None:
    history = _history(40)
    current = [ChatMessage.user("now")]
    tail = [ChatMessage.system("skill index")]
    sent = fit([], history, current, tail, 1_000)
    assert _tokens([*sent, *tail]) <= 1_000
    assert [m.marker for m in sent[:2]] == [Marker.AGENT_PROMPT, Marker.HISTORY_COMPACTION]
    assert sent[2].role is Role.USER  # a turn starts whole
    assert sent[-1] is current[0]
    assert sent[-2].content == "answer 39"  # the newest turns are kept
    called = {c.id for m in sent for c in m.tool_calls}
    assert all(m.tool_call_id in called for m in sent if m.role is Role.TOOL)


def test_a_current_turn_too_large_alone_has_its_tool_results_cut() -> None:
    call = ToolCall("c1", "read", "{}")
    current = [
        ChatMessage.user("read the log"),
        ChatMessage(Role.ASSISTANT, "", tool_calls=(call,)),
        ChatMessage.tool_result(call, "L" * 50_000),
    ]
    sent = fit([], _history(2), current, (), 2_000)
    assert _tokens(sent) <= 2_000
    assert sent[-1].role is Role.TOOL
    assert sent[-1].tool_call_id == "c1"
    assert sent[-1].content.endswith("[… cut to fit the model's context window]")
    assert current[-1].content == "L" * 50_000  # the history itself is untouched


def test_prepared_context_fits_with_a_budget_and_trims_without_one() -> None:
    history = [*_history(40), ChatMessage.user("now")]
    context = PreparedContext((ChatMessage.system("operator"),), 2_000)
    whole = context.messages(history, len(history) - 1)
    assert len(whole) == len(history) + 1
    fitted = context.messages(history, len(history) - 1, 1_500)
    assert _tokens(fitted) <= 1_500
    assert fitted[0].content == "operator"
    assert fitted[-1].content == "now"


def test_the_budget_leaves_room_for_the_reply_and_the_tools() -> None:
    tools = [ToolSpec("read", "Read a file " * 100, {"type": "object"})]
    assert request_budget(100_000, 8_000, ()) == 92_000
    assert request_budget(100_000, None, ()) == 100_000 - 4_096
    assert request_budget(100_000, 8_000, tools) < 92_000
    assert request_budget(8_000, 7_000, tools) == 2_000  # never below a quarter


def test_a_tool_set_is_measured_again_when_it_changes() -> None:
    """The size of a tool set is kept between turns: a set of other specs (an
    MCP server's tools came or went) must not get the old set's size."""
    small = [ToolSpec("read", "Read a file", {"type": "object"})]
    large = [*small, ToolSpec("grep", "Search files " * 400, {"type": "object"})]
    budget_small = request_budget(100_000, 8_000, small)
    assert request_budget(100_000, 8_000, large) < budget_small - 1_000
    assert request_budget(100_000, 8_000, small) == budget_small
    replaced = [ToolSpec("read", "Read a file " * 400, {"type": "object"})]
    assert request_budget(100_000, 8_000, replaced) < budget_small - 1_000


def test_shared_prefix_finds_where_two_requests_part() -> None:
    msgs = [ChatMessage.user(f"m{i}") for i in range(50)]
    tail = ChatMessage.system("skill index")
    assert shared_prefix([*msgs, ChatMessage.user("new")], [*msgs, tail]) == 50
    assert shared_prefix(msgs, msgs[:20]) == 20
    assert shared_prefix(msgs[:20], msgs) == 20
    for cut in (0, 1, 17, 33, 46, 49):
        other = [*msgs[:cut], ChatMessage.user("else"), *msgs[cut + 1 :]]
        assert shared_prefix(msgs, other) == cut
    assert shared_prefix([], msgs) == 0
    copy = [ChatMessage(m.role, m.content, created_at=m.created_at) for m in msgs]
    assert shared_prefix(msgs, copy) == 50  # equal messages are sent the same
