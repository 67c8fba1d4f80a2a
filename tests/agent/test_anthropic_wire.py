"""The Anthropic request body: system blocks, system messages kept in place,
the tail behind the last breakpoint, at most four breakpoints."""

from __future__ import annotations

import json
from typing import Any

from agent.messages import ChatMessage, Marker, Role, ToolCall
from agent.providers.anthropic_wire import (
    MAX_BREAKPOINTS,
    AnthropicPrompt,
    reminder_text,
    to_anthropic_prompt,
    to_anthropic_tools,
)
from agent.providers.base import CacheTTL, ToolSpec

TOOLS = (
    ToolSpec("calculator", "Evaluate arithmetic", {"type": "object", "properties": {}}),
    ToolSpec("get_time", "The current time", {"type": "object", "properties": {}}),
)
CACHED = {"type": "ephemeral"}


def _history(*, compacted: bool = False) -> list[ChatMessage]:
    call = ToolCall("toolu_1", "calculator", '{"expression": "6*7"}')
    head = [
        ChatMessage.system("Be brief."),  # the operator prompt, from the context builder
        ChatMessage.system("AGENT.md v1", Marker.AGENT_PROMPT),
    ]
    if compacted:
        head.append(ChatMessage.system("[Compressed History] earlier", Marker.HISTORY_COMPACTION))
    return [
        *head,
        ChatMessage.user("what is 6*7?"),
        ChatMessage(Role.ASSISTANT, "", tool_calls=(call,)),
        ChatMessage.tool_result(call, "42"),
        ChatMessage(Role.ASSISTANT, "It is 42."),
        ChatMessage.system("AGENT.md v1", Marker.AGENT_PROMPT),  # re-injected
        ChatMessage.user("thanks"),
    ]


def _marked(value: Any) -> list[str]:
    """Text (or tool name / id) of every block that carries a breakpoint."""
    found: list[str] = []
    if isinstance(value, dict):
        if "cache_control" in value:
            found.append(str(value.get("text") or value.get("name") or value.get("tool_use_id")))
        for item in value.values():
            found += _marked(item)
    elif isinstance(value, list):
        for item in value:
            found += _marked(item)
    return found


async def test_later_system_messages_stay_in_place_and_system_is_only_the_leading_run() -> None:
    prompt = await to_anthropic_prompt(_history())
    assert prompt.system == [
        {"type": "text", "text": "Be brief."},
        {"type": "text", "text": "AGENT.md v1"},
    ]
    last = prompt.messages[-1]
    assert last == {
        "role": "user",
        "content": [
            {"type": "text", "text": reminder_text("AGENT.md v1")},  # near the latest turn
            {"type": "text", "text": "thanks"},
        ],
    }


async def test_breakpoints_on_tools_agent_prompt_summary_and_latest_history() -> None:
    tools = to_anthropic_tools(TOOLS)
    tail = [ChatMessage.system("memory: likes tea", "memory")]
    prompt = await to_anthropic_prompt(_history(compacted=True), tail)
    prompt.mark_cache(tools, CacheTTL.FIVE_MINUTES)
    marked = _marked([tools, prompt.system, prompt.messages])
    assert marked == ["get_time", "AGENT.md v1", "[Compressed History] earlier", "thanks"]
    assert len(marked) == MAX_BREAKPOINTS
    assert prompt.system[0] == {"type": "text", "text": "Be brief."}  # no marker: stable
    # the tail goes after the last breakpoint, inside the last user turn
    assert prompt.messages[-1]["content"][-1] == {
        "type": "text",
        "text": reminder_text("memory: likes tea"),
    }
    assert prompt.messages[-1]["content"][-2]["cache_control"] == CACHED


async def test_one_hour_ttl_is_sent_and_the_default_is_left_out() -> None:
    tools = to_anthropic_tools(TOOLS)
    prompt = await to_anthropic_prompt(_history())
    prompt.mark_cache(tools, CacheTTL.ONE_HOUR)
    assert tools[-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert "cache_control" not in tools[0]
    assert _marked(prompt.system) == ["AGENT.md v1"]  # no summary yet: one system breakpoint


def _flat(tools: list[dict[str, Any]], prompt: AnthropicPrompt) -> tuple[list[str], int]:
    """Every block of the request in prompt order (markers aside), and the
    index of the last one with a breakpoint."""
    blocks = [("tool", b) for b in tools] + [("system", b) for b in prompt.system]
    blocks += [(m["role"], b) for m in prompt.messages for b in m["content"]]
    last = max(i for i, (_, b) in enumerate(blocks) if "cache_control" in b)
    bare = [
        json.dumps([role, {k: v for k, v in b.items() if k != "cache_control"}])
        for role, b in blocks
    ]
    return bare, last


async def test_each_call_repeats_the_previous_calls_bytes_up_to_its_last_breakpoint() -> None:
    history = _history()
    first = await to_anthropic_prompt(history, [ChatMessage.system("time: 10:00", "time")])
    first_tools = to_anthropic_tools(TOOLS)
    first.mark_cache(first_tools, CacheTTL.FIVE_MINUTES)
    history += [ChatMessage(Role.ASSISTANT, "You're welcome."), ChatMessage.user("bye")]
    second = await to_anthropic_prompt(history, [ChatMessage.system("time: 10:01", "time")])
    second_tools = to_anthropic_tools(TOOLS)
    second.mark_cache(second_tools, CacheTTL.FIVE_MINUTES)
    before, last = _flat(first_tools, first)
    after, _ = _flat(second_tools, second)
    assert after[: last + 1] == before[: last + 1]
    assert "time: 10:00" in before[last + 1]  # the tail came after the breakpoint
