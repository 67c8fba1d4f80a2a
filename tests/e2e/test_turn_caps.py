"""The turn's spend caps (agents.<name>.max_turn_tokens, max_turn_cost): a turn
that has used its tokens or money stops before its next model call, with a
reply saying which cap, every tool call answered; the chat goes on."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.messages import Role
from gateway.bus import Origin, TurnRequest
from tests.fakes.openai_server import FakeOpenAI, Reply, ScriptedToolCall
from tests.fakes.recording_channel import RecordingChannel
from tests.support import conversation, make_config, running_gateway, ws_client


def _rounds(llm: FakeOpenAI, n: int, usage: tuple[int, int]) -> None:
    """`n` model answers that each call a tool (a new expression each time, so
    no loop) and report `usage` (input, output tokens)."""
    for i in range(n):
        call = ScriptedToolCall("calculator", {"expression": f"{i} + 1"}, f"c{i}")
        llm.add_reply(Reply(tool_calls=(call,), usage=usage))


async def test_a_turn_stops_at_its_token_cap(home: Path, llm: FakeOpenAI) -> None:
    _rounds(llm, 3, usage=(3_000, 500))  # 3,500 tokens a call
    llm.add_text("next answer")  # what a fourth call would get: the cap comes first
    loaded = make_config(home, llm.base_url, agents={"default": {"max_turn_tokens": 10_000}})
    async with running_gateway(loaded) as gw, ws_client(gw, "cap") as client:
        reply = await client.ask("count for a long time")
        # 3 calls, 10,500 tokens: the cap is checked before the 4th
        assert reply.startswith("I stopped: this request has used 10,500 tokens, over its cap")
        assert len(llm.requests) == 3

        assert await client.ask("and now?") == "next answer"  # a new turn, a new count
        messages = conversation(llm.requests[-1])
        calls = [c["id"] for m in messages for c in m.get("tool_calls") or []]
        results = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
        assert calls == results == ["c0", "c1", "c2"]  # every call answered
        assert gw.store is not None
        _, history = await gw.store.history_snapshot("cap")
        assert [m.role for m in history][-3:] == [Role.ASSISTANT, Role.USER, Role.ASSISTANT]


async def test_a_turn_stops_at_its_cost_cap(home: Path, llm: FakeOpenAI) -> None:
    """At 1 per million input and 2 per million output tokens, each call costs
    0.002 + 0.001; the cap of 0.005 is passed after the second."""
    _rounds(llm, 2, usage=(2_000, 500))
    llm.add_text("unused")
    loaded = make_config(
        home,
        llm.base_url,
        models={"default": {"model_id": "fake-model", "prices": {"input": 1.0, "output": 2.0}}},
        agents={"default": {"max_turn_cost": 0.005, "max_turn_tokens": None}},
    )
    async with running_gateway(loaded) as gw, ws_client(gw, "cost") as client:
        reply = await client.ask("spend")
    assert reply.startswith("I stopped: this request has cost 0.006, over its cap of 0.005")
    assert len(llm.requests) == 2


async def test_no_cap_lets_a_long_turn_finish(home: Path, llm: FakeOpenAI) -> None:
    _rounds(llm, 4, usage=(3_000, 500))
    llm.add_text("done")
    loaded = make_config(home, llm.base_url, agents={"default": {"max_turn_tokens": None}})
    async with running_gateway(loaded) as gw, ws_client(gw, "free") as client:
        assert await client.ask("go") == "done"
    assert len(llm.requests) == 5


async def test_a_sub_agent_spends_the_remaining_budget_of_its_turn(
    home: Path, llm: FakeOpenAI
) -> None:
    """The parent's call (4,000 tokens) and the child's (4,000 each) count into
    one budget of 10,000: the child stops after its second call, the parent
    before its next one."""
    task = {"description": "dig", "prompt": "keep digging", "subagent_type": "general"}
    llm.add_reply(
        Reply(tool_calls=(ScriptedToolCall("task", task, "call-task"),), usage=(3_500, 500))
    )
    _rounds(llm, 2, usage=(3_500, 500))  # the child's two calls
    llm.add_text("unused")  # what a further call would get
    loaded = make_config(home, llm.base_url, agents={"default": {"max_turn_tokens": 10_000}})
    async with running_gateway(loaded) as gw, ws_client(gw, "sub") as client:
        reply = await client.ask("dig deep")
        assert gw.store is not None
        child = await gw.store.transcripts.session_messages("task:sub:call-task")
    assert len(llm.requests) == 3  # the parent's, the child's two: nothing more
    assert child[-1].content.startswith("I stopped: this request has used 12,000 tokens")
    assert reply.startswith("I stopped: this request has used 12,000 tokens")


@pytest.mark.parametrize(
    ("payload_cap", "scheduler_cap", "calls"),
    [
        (5_000, None, 2),  # the job's own cap: 3,500 then 7,000 tokens
        (None, 8_000, 3),  # the scheduler's cap of every run: 10,500 after the third
    ],
)
async def test_a_scheduled_run_has_its_own_cap(
    home: Path, llm: FakeOpenAI, payload_cap: int | None, scheduler_cap: int | None, calls: int
) -> None:
    _rounds(llm, calls, usage=(3_000, 500))
    llm.add_text("unused")  # the agent's own cap (1,000,000) would let the run go on
    job = {
        "id": "nightly",
        "kind": "agent_task",
        "schedule": {"type": "delay", "seconds": 0.2},
        "target": {"channel": "rec", "chat_id": "team"},
        "payload": {"prompt": "dig through the logs", "max_tokens": payload_cap},
    }
    scheduler = {"enabled": True, "tick_resolution_ms": 10, "jobs": [job]}
    scheduler["max_run_tokens"] = scheduler_cap
    channel = RecordingChannel()
    loaded = make_config(home, llm.base_url, scheduler=scheduler)
    async with running_gateway(loaded, extra_channels=[channel]):
        [sent] = await channel.wait_sent(1)
    assert sent.message.text.startswith("I stopped: this request has used")
    assert len(llm.requests) == calls


def test_a_run_keeps_its_cap_through_the_inbox() -> None:
    """Stored with the inbox row as text, read back as a number (a crash resumes it capped)."""
    request = TurnRequest(origin=Origin.SCHEDULER, job_id="nightly", max_tokens=5_000)
    assert TurnRequest.from_dict(request.to_dict()) == request
