"""The context builder: what each request holds around the history."""

from __future__ import annotations

from agent.context import (
    AgentPromptPolicy,
    ContextBuilder,
    ContextSettings,
    TurnFacts,
)
from agent.messages import ChatMessage, Marker, Role, ToolCall

FACTS = TurnFacts("s1", "websocket", "c", "u", "default")


class _Part:
    def __init__(self, name: str, text: str | None, marker: Marker | None = None) -> None:
        self.name = name
        self.text = text
        self.marker = marker
        self.rendered: list[TurnFacts] = []

    async def render(self, turn: TurnFacts) -> str | None:
        self.rendered.append(turn)
        return self.text


def _history() -> list[ChatMessage]:
    call = ToolCall("t1", "read", "{}")
    return [
        ChatMessage.system("AGENT.md text", Marker.AGENT_PROMPT),
        ChatMessage.user("earlier"),
        ChatMessage(Role.ASSISTANT, "", tool_calls=(call,)),
        ChatMessage.tool_result(call, "x" * 500),
        ChatMessage(Role.ASSISTANT, "done"),
        ChatMessage.user("now"),
        ChatMessage(Role.ASSISTANT, "", tool_calls=(call,)),
        ChatMessage.tool_result(call, "y" * 500),
    ]


async def test_parts_go_after_the_history_and_the_operator_prompt_first() -> None:
    skills = _Part("skills", "skill index", Marker.SKILL_INDEX)
    empty = _Part("memory", None)
    builder = ContextBuilder(ContextSettings("operator extras", 100), [skills, empty])
    prepared = await builder.prepare(FACTS)
    history = _history()
    sent = prepared.messages(history, turn_start=5)
    assert [(m.role, m.content[:13]) for m in sent[:2]] == [
        (Role.SYSTEM, "operator extr"),
        (Role.SYSTEM, "AGENT.md text"),
    ]
    assert len(sent) == 1 + len(history)  # the parts are not in the cacheable prefix
    assert [(m.content, m.marker) for m in prepared.tail] == [("skill index", Marker.SKILL_INDEX)]
    assert skills.rendered == [FACTS]
    assert empty.rendered == [FACTS]  # rendered, and left out: it had nothing
    assert prepared.cache_key == FACTS.session_id


async def test_the_prefix_is_the_same_on_every_call_of_every_turn() -> None:
    """Volatile parts change every turn; what comes before the tail does not."""
    clock = _Part("time", "")
    builder = ContextBuilder(ContextSettings("operator extras", 100), [clock])
    history = _history()[:5]
    seen: list[list[str]] = []
    for turn in range(3):
        clock.text = f"it is {turn} o'clock"
        prepared = await builder.prepare(FACTS)
        history.append(ChatMessage.user(f"question {turn}"))
        sent = prepared.messages(history, turn_start=len(history) - 1)
        seen.append([m.content for m in sent])
        assert prepared.tail[0].content == f"it is {turn} o'clock"
        history.append(ChatMessage(Role.ASSISTANT, f"answer {turn}"))
    assert seen[1][: len(seen[0])] == seen[0]
    assert seen[2][: len(seen[1])] == seen[1]


async def test_only_earlier_turns_tool_results_are_trimmed() -> None:
    prepared = await ContextBuilder(ContextSettings(None, 100)).prepare(FACTS)
    history = _history()
    sent = prepared.messages(history, turn_start=5)
    old, current = sent[3], sent[7]
    assert old.content.startswith("x" * 100)
    assert "old tool result cut: 400 more" in old.content
    assert current.content == "y" * 500
    assert history[3].content == "x" * 500  # the stored history is left alone
    assert sent[0].content == "AGENT.md text"  # no operator prompt configured


async def test_a_history_changed_at_the_front_is_looked_at_again() -> None:
    """The older turns of a conversation's last request are kept, and reused
    only while they are still the start of the history: a compaction or a
    reset that replaced them must not send the old ones."""
    builder = ContextBuilder(ContextSettings(None, 100))
    history = _history()
    first = (await builder.prepare(FACTS)).messages(history, turn_start=5)
    history += [ChatMessage(Role.ASSISTANT, "later"), ChatMessage.user("again")]
    second = (await builder.prepare(FACTS)).messages(history, turn_start=len(history) - 1)
    assert second[:7] == first[:7]  # grown at the end: the same messages, the same copy
    assert second[3] is first[3]
    assert "old tool result cut" in second[7].content  # no longer this turn's: trimmed now
    compacted = [ChatMessage.system("summary", Marker.HISTORY_COMPACTION), *history[5:]]
    third = (await builder.prepare(FACTS)).messages(compacted, turn_start=len(compacted) - 1)
    assert [m.content[:7] for m in third] == ["summary", "now", "", "y" * 7, "later", "again"]
    assert "old tool result cut" in third[3].content  # an earlier turn's now: trimmed


def test_the_agent_prompt_goes_into_a_new_history_and_every_n_turns() -> None:
    policy = AgentPromptPolicy(every=3)
    fresh = policy.check("persona", [], user_turns=0, prompt_turn=None)
    assert fresh is not None
    assert fresh.marker is Marker.AGENT_PROMPT
    history = [fresh, ChatMessage.user("hi")]
    assert policy.check("persona", history, user_turns=1, prompt_turn=1) is None
    assert policy.check("persona", history, user_turns=3, prompt_turn=1) is not None
    assert policy.check(None, [], user_turns=0, prompt_turn=None) is None  # no prompt file
