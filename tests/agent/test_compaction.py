"""History compaction: estimate, trigger, boundary, split, transcript, loop guard.

The summary call runs against the fake OpenAI server through the real
OpenAIProvider (the tests at the end of this file); the rest is pure.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agent.compaction import (
    CompactionResult,
    CompactionState,
    compact,
    count_user_turns,
    estimate_tokens,
    plan_boundary,
    should_compact,
    split_history,
    splits_tool_pair,
    tokens_for_chars,
    transcript_budget_chars,
    trigger_tokens,
)
from agent.compaction_prompt import (
    COMPRESSED_HISTORY_PREFIX,
    cut_to_budget,
    format_transcript,
    with_prefix,
)
from agent.messages import ChatMessage, Marker, Role, ToolCall
from agent.providers.base import DeltaSink, LLMRequest, LLMResponse, ProviderSettings
from agent.providers.openai import OpenAIProvider
from tests.fakes.openai_server import FakeOpenAI


def tool_turn(n: int, *, filler: str = "") -> list[ChatMessage]:
    """A user turn with one tool round trip: user, assistant call, tool result, answer."""
    call = ToolCall(f"call_{n}", "read", f'{{"path": "/srv/file{n}.txt"}}')
    return [
        ChatMessage.user(f"question {n} {filler}"),
        ChatMessage(Role.ASSISTANT, "", tool_calls=(call,)),
        ChatMessage.tool_result(call, f"contents of file {n}"),
        ChatMessage(Role.ASSISTANT, f"answer {n}"),
    ]


def conversation(turns: int, *, filler: str = "") -> list[ChatMessage]:
    history = [ChatMessage.system("persona", marker=Marker.AGENT_PROMPT)]
    for n in range(1, turns + 1):
        history.extend(tool_turn(n, filler=filler))
    return history


# -- estimate ------------------------------------------------------------------------


def test_estimate_is_characters_over_four_times_one_point_two() -> None:
    assert estimate_tokens([ChatMessage.user("x" * 40)]) == 12
    assert estimate_tokens([ChatMessage.user("x" * 1000)]) == 300
    assert estimate_tokens([]) == 0


def test_estimate_rounds_up() -> None:
    assert estimate_tokens([ChatMessage.user("x")]) == 1
    assert estimate_tokens([ChatMessage.user("x" * 11)]) == 4  # 3.3 -> 4
    assert [tokens_for_chars(n) for n in (0, 1, 10, 11, 4000)] == [0, 1, 3, 4, 1200]


def test_estimate_counts_reasoning_and_tool_calls() -> None:
    call = ToolCall("c1", "bash", "x" * 16)  # name 4 + arguments 16 = 20 chars
    message = ChatMessage(Role.ASSISTANT, "x" * 10, tool_calls=(call,), reasoning_content="y" * 10)
    assert estimate_tokens([message]) == 12  # 40 chars


# -- trigger -------------------------------------------------------------------------


def test_no_compaction_below_the_trigger() -> None:
    history = conversation(10)
    assert estimate_tokens(history) <= trigger_tokens(128_000)
    assert not should_compact(history, 128_000, 0.5, 3)


def test_compaction_above_the_trigger() -> None:
    history = conversation(4, filler="x" * 1000)
    assert estimate_tokens(history) > trigger_tokens(2_000, 0.5)
    assert should_compact(history, window_tokens=2_000, ratio=0.5, keep_user_turns=3)


def test_the_ratio_moves_the_trigger() -> None:
    history = conversation(4, filler="x" * 1000)  # ~1,300 estimated tokens
    assert should_compact(history, window_tokens=4_000, ratio=0.3, keep_user_turns=3)
    assert not should_compact(history, window_tokens=4_000, ratio=0.5, keep_user_turns=3)


def test_never_with_no_more_user_turns_than_kept() -> None:
    history = conversation(3, filler="x" * 10_000)
    assert estimate_tokens(history) > trigger_tokens(1_000)
    assert not should_compact(history, window_tokens=1_000, ratio=0.5, keep_user_turns=3)
    assert should_compact(history, window_tokens=1_000, ratio=0.5, keep_user_turns=2)


# -- boundary ------------------------------------------------------------------------


def test_boundary_starts_the_last_kept_user_turns() -> None:
    history = conversation(5)
    boundary = plan_boundary(history, keep_user_turns=3)
    assert boundary is not None
    assert history[boundary].role is Role.USER
    assert history[boundary].content.startswith("question 3")
    assert count_user_turns(history[boundary:]) == 3


def test_no_boundary_without_an_older_user_turn() -> None:
    assert plan_boundary(conversation(3), keep_user_turns=3) is None
    assert plan_boundary([], keep_user_turns=3) is None
    with pytest.raises(ValueError, match="keep_user_turns"):
        plan_boundary(conversation(5), keep_user_turns=0)


def test_boundary_never_separates_a_tool_call_from_its_result() -> None:
    # A user message squeezed between a call and its result (e.g. a message
    # merged in during a crash repair) must not become the boundary.
    call = ToolCall("call_x", "bash", '{"cmd": "ls"}')
    history = [
        *tool_turn(1),
        ChatMessage.user("question 2"),
        ChatMessage(Role.ASSISTANT, "", tool_calls=(call,)),
        ChatMessage.user("question 3, sent while the tool ran"),
        ChatMessage.tool_result(call, "a b c"),
        ChatMessage(Role.ASSISTANT, "answer 3"),
        *tool_turn(4),
        *tool_turn(5),
    ]
    naive = [i for i, m in enumerate(history) if m.role is Role.USER][-3]
    assert splits_tool_pair(history, naive)

    boundary = plan_boundary(history, keep_user_turns=3)

    assert boundary is not None
    assert boundary < naive
    assert not splits_tool_pair(history, boundary)
    assert history[boundary].content == "question 2"


def test_no_boundary_when_every_candidate_splits_a_pair() -> None:
    call = ToolCall("call_x", "bash", "{}")
    history = [
        ChatMessage.user("question 1"),
        ChatMessage(Role.ASSISTANT, "", tool_calls=(call,)),
        ChatMessage.user("question 2"),
        ChatMessage.tool_result(call, "done"),
        ChatMessage.user("question 3"),
    ]
    assert plan_boundary(history, keep_user_turns=2) is None
    assert not should_compact(history, window_tokens=10, ratio=0.5, keep_user_turns=2)


# -- loop guard ----------------------------------------------------------------------


def test_a_compaction_that_stayed_above_the_trigger_waits_for_a_new_user_turn() -> None:
    history = conversation(6, filler="x" * 1000)
    window = 2_000
    assert should_compact(history, window, 0.5, 3)
    stuck = CompactionState(last_estimate_after=trigger_tokens(window) + 1, turns_at_last=6)

    assert not should_compact(history, window, 0.5, 3, state=stuck)
    assert should_compact([*history, *tool_turn(7)], window, 0.5, 3, state=stuck)


def test_a_compaction_that_got_below_the_trigger_does_not_block() -> None:
    history = conversation(6, filler="x" * 1000)
    window = 2_000
    done = CompactionState(last_estimate_after=trigger_tokens(window) - 1, turns_at_last=6)
    assert should_compact(history, window, 0.5, 3, state=done)


def test_state_after_a_result_counts_the_kept_turns() -> None:
    history = conversation(5)
    split = split_history(history, plan_boundary(history, 3) or 0)
    summary = ChatMessage.system(with_prefix("s"), marker=Marker.HISTORY_COMPACTION)
    result = CompactionResult(split.kept_system, summary, split.recent, 900, 700, True)
    assert CompactionState.after(result) == CompactionState(700, 3)
    assert result.shrunk
    assert result.new_history == [*split.kept_system, summary, *split.recent]


# -- split ---------------------------------------------------------------------------


def test_split_keeps_marked_system_messages_and_folds_the_rest() -> None:
    scheduled = ChatMessage.system("only report errors", marker=Marker.SCHEDULED_SYSTEM_PROMPT)
    old_prompt = ChatMessage.system("persona v1", marker=Marker.AGENT_PROMPT)
    new_prompt = ChatMessage.system("persona v2", marker=Marker.AGENT_PROMPT)
    earlier = ChatMessage.system(with_prefix("they talked"), marker=Marker.HISTORY_COMPACTION)
    skills = ChatMessage.system("skills: pdf", marker=Marker.SKILL_INDEX)
    plain = ChatMessage.system("note: timezone is UTC")
    history = [
        old_prompt,
        earlier,
        scheduled,
        *tool_turn(1),
        skills,
        new_prompt,
        plain,
        *tool_turn(2),
        *tool_turn(3),
        *tool_turn(4),
        *tool_turn(5),
    ]
    boundary = plan_boundary(history, 3)
    assert boundary is not None

    split = split_history(history, boundary)

    assert split.kept_system == (scheduled, new_prompt)
    assert earlier in split.folded
    assert plain in split.folded
    assert skills not in split.folded
    assert old_prompt not in split.folded
    assert split.recent == tuple(history[boundary:])
    assert count_user_turns(split.recent) == 3
    assert count_user_turns(split.folded) == 2


def test_split_refuses_a_boundary_that_is_not_a_user_message() -> None:
    history = conversation(5)
    with pytest.raises(ValueError, match="not a user message"):
        split_history(history, 2)
    with pytest.raises(ValueError, match="not a user message"):
        split_history(history, 0)


def test_split_refuses_a_boundary_between_a_call_and_its_result() -> None:
    call = ToolCall("c", "bash", "{}")
    history = [
        ChatMessage.user("q1"),
        ChatMessage(Role.ASSISTANT, "", tool_calls=(call,)),
        ChatMessage.user("q2"),
        ChatMessage.tool_result(call, "ok"),
    ]
    with pytest.raises(ValueError, match="separates"):
        split_history(history, 2)


# -- transcript ----------------------------------------------------------------------


def test_transcript_keeps_roles_tool_names_and_arguments() -> None:
    earlier = ChatMessage.system(with_prefix("user likes tea"), marker=Marker.HISTORY_COMPACTION)
    photo = ChatMessage.user("what is this?", media=("/media/cat.jpg",))
    head, body = format_transcript([earlier, *tool_turn(1), photo])

    assert head == f"[earlier summary]\n{COMPRESSED_HISTORY_PREFIX}\nuser likes tea"
    assert body.split("\n\n") == [
        "[user] question 1 ",
        '[assistant tool call read] {"path": "/srv/file1.txt"}',
        "[tool read] contents of file 1",
        "[assistant] answer 1",
        "[user] what is this?\n[user attachments] /media/cat.jpg",
    ]


def test_cut_keeps_the_most_recent_part_and_says_so() -> None:
    body = "".join(f"line {n:04d}\n" for n in range(1000))  # 10,000 chars
    cut = cut_to_budget("", body, 2_000)

    assert len(cut) <= 2_000
    assert cut.endswith("line 0999\n")
    assert "line 0000" not in cut
    assert cut.startswith("[... earlier part of the transcript cut: ")
    omitted = int(cut.split("cut: ")[1].split(" ")[0])
    assert omitted == len(body) - len(cut.split("...]\n", 1)[1])


def test_cut_spares_the_earlier_summary() -> None:
    cut = cut_to_budget("SUMMARY", "b" * 5_000, 1_000)
    assert cut.startswith("SUMMARY\n\n[... earlier part")
    assert len(cut) <= 1_000


def test_nothing_is_cut_within_the_budget() -> None:
    assert cut_to_budget("head", "body", 100) == "head\n\nbody"
    assert cut_to_budget("", "body", 4) == "body"


def test_budget_follows_the_context_window() -> None:
    assert transcript_budget_chars(128_000) == 204_800
    assert transcript_budget_chars(8_000) == 12_800


def test_summary_prefix_is_added_once() -> None:
    assert with_prefix("  facts  ") == f"{COMPRESSED_HISTORY_PREFIX}\nfacts"
    assert (
        with_prefix(f"{COMPRESSED_HISTORY_PREFIX} facts") == f"{COMPRESSED_HISTORY_PREFIX}\nfacts"
    )


# -- the summary call, against the fake OpenAI server --------------------------------


@pytest.fixture
async def llm() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


@pytest.fixture
async def provider(llm: FakeOpenAI) -> AsyncIterator[OpenAIProvider]:
    settings = ProviderSettings(name="default", api_key="k", base_url=llm.base_url, max_retries=0)
    openai_provider = OpenAIProvider(settings)
    yield openai_provider
    await openai_provider.aclose()


def _pairs_whole(history: list[ChatMessage]) -> bool:
    """Every tool result follows its call, and every call has its result."""
    called: set[str] = set()
    answered: set[str] = set()
    for message in history:
        called.update(call.id for call in message.tool_calls)
        if message.role is Role.TOOL:
            if message.tool_call_id not in called:
                return False
            answered.add(message.tool_call_id)
    return called == answered


def _long_history() -> list[ChatMessage]:
    earlier = ChatMessage.system(
        with_prefix("The user is migrating the blog to Hugo."), marker=Marker.HISTORY_COMPACTION
    )
    history = conversation(5)
    history.insert(1, earlier)
    history.insert(2, ChatMessage.user("see https://example.org/spec and /etc/app.toml"))
    history.insert(3, ChatMessage(Role.ASSISTANT, "noted"))
    return history


async def test_the_summary_request_carries_the_transcript_and_the_keep_list(
    llm: FakeOpenAI, provider: OpenAIProvider
) -> None:
    llm.add_text("User asked about files 1 and 2; read /srv/file1.txt and /srv/file2.txt.")
    history = _long_history()

    result = await compact(history, provider, "gpt-test", 128_000, 3, timeout_secs=5)

    assert result is not None
    [request] = llm.requests
    assert request["model"] == "gpt-test"
    system, user = request["messages"]
    assert system["role"] == "system"
    for kept in ("user requests", "identifiers", "file paths", "URLs", "tool calls"):
        assert kept in system["content"]
    for kept in ("commands", "results", "error", "decisions", "preferences", "task state"):
        assert kept in system["content"]
    transcript = user["content"]
    assert user["role"] == "user"
    assert "[earlier summary]\n[Compressed History]\nThe user is migrating" in transcript
    assert "[user] see https://example.org/spec and /etc/app.toml" in transcript
    assert '[assistant tool call read] {"path": "/srv/file2.txt"}' in transcript
    assert "[tool read] contents of file 2" in transcript
    assert "question 3" not in transcript  # the recent turns are kept, not summarised
    assert "persona" not in transcript  # the agent prompt is kept verbatim

    assert result.summarised
    assert result.summary.role is Role.SYSTEM
    assert result.summary.marker == Marker.HISTORY_COMPACTION
    assert result.summary.content == (
        "[Compressed History]\n"
        "User asked about files 1 and 2; read /srv/file1.txt and /srv/file2.txt."
    )


async def test_the_new_history_is_prompt_summary_and_the_last_three_whole_turns(
    llm: FakeOpenAI, provider: OpenAIProvider
) -> None:
    llm.add_text("summary of turns 1-2")
    history = _long_history()

    result = await compact(history, provider, "gpt-test", 128_000, 3, timeout_secs=5)

    assert result is not None
    new = result.new_history
    assert new[0] is history[0]  # AGENT.md, verbatim
    assert new[1] is result.summary
    assert new[2:] == history[-12:]  # turns 3, 4 and 5, four messages each
    assert [m.content for m in new if m.role is Role.USER] == [
        "question 3 ",
        "question 4 ",
        "question 5 ",
    ]
    assert _pairs_whole(new)
    assert sum(1 for m in new if m.marker == Marker.HISTORY_COMPACTION) == 1
    assert result.estimate_before == estimate_tokens(history)
    assert result.estimate_after == estimate_tokens(new)


async def test_a_summary_over_its_budget_is_cut_and_the_request_asks_for_the_limit(
    llm: FakeOpenAI, provider: OpenAIProvider
) -> None:
    window = 20_000  # the summary's budget: 5% of it, 4,000 characters
    llm.add_text("\n".join(f"fact {n}: " + "f" * 60 for n in range(2_000)))  # ~138,000 chars

    result = await compact(_long_history(), provider, "gpt-test", window, 3, timeout_secs=5)

    assert result is not None
    assert result.summarised
    [request] = llm.requests
    assert "in at most 4,000 characters" in request["messages"][1]["content"]
    content = result.summary.content
    assert content.startswith("[Compressed History]\nfact 0: ")
    assert content.endswith(" characters omitted ...]")
    assert "fact 1999" not in content
    assert len(content) <= 4_000 + 100  # the prefix and the notice


async def test_a_failed_summary_falls_back_to_the_truncated_transcript(
    llm: FakeOpenAI, provider: OpenAIProvider
) -> None:
    llm.add_error(500)
    history = conversation(40, filler="x" * 200)  # the old part is far above the budget
    window = 4_000  # fallback budget: 1,600 characters

    result = await compact(history, provider, "gpt-test", window, 3, timeout_secs=5)

    assert result is not None
    assert len(llm.requests) == 1
    assert not result.summarised
    assert result.summary.marker == Marker.HISTORY_COMPACTION
    content = result.summary.content
    assert content.startswith("[Compressed History]\n(No summary could be produced")
    assert "[... earlier part of the transcript cut: " in content
    assert "[assistant] answer 37" in content  # the newest folded turn survives
    assert "question 1 " not in content
    assert len(content) < 1_800
    assert result.shrunk
    assert _pairs_whole(result.new_history)


async def test_a_summary_that_does_not_arrive_in_time_falls_back(
    llm: FakeOpenAI, provider: OpenAIProvider
) -> None:
    llm.hold()  # the request is recorded but never answered
    history = conversation(5)

    result = await compact(history, provider, "gpt-test", 128_000, 3, timeout_secs=0.2)

    assert result is not None
    assert len(llm.requests) == 1
    assert not result.summarised
    assert "[assistant] answer 2" in result.summary.content
    llm.release()


async def test_an_empty_summary_falls_back(llm: FakeOpenAI, provider: OpenAIProvider) -> None:
    llm.add_text("   ")
    result = await compact(conversation(5), provider, "gpt-test", 128_000, 3, timeout_secs=5)
    assert result is not None
    assert not result.summarised
    assert "[tool read] contents of file 2" in result.summary.content


async def test_nothing_to_fold_means_no_call(llm: FakeOpenAI, provider: OpenAIProvider) -> None:
    assert await compact(conversation(3), provider, "gpt-test", 128_000, 3) is None
    assert llm.requests == []


class _BrokenProvider:
    """A provider with a bug: raises something outside the ProviderError tree."""

    name = "broken"

    async def complete(self, request: LLMRequest, on_delta: DeltaSink | None = None) -> LLMResponse:
        raise KeyError("choices")

    async def aclose(self) -> None:
        return None


async def test_a_provider_bug_never_reaches_the_main_flow() -> None:
    result = await compact(conversation(5), _BrokenProvider(), "m", 128_000, 3, timeout_secs=5)
    assert result is not None
    assert not result.summarised
