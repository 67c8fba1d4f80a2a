"""The loop guard (agents.<name>.max_identical_tool_calls): a model that asks for
the same tool call with the same arguments, and gets the same result, round
after round, is stopped; the transcript stays valid and the chat goes on."""

from __future__ import annotations

from pathlib import Path

from agent.messages import Role
from tests.fakes.openai_server import FakeOpenAI
from tests.support import conversation, make_config, running_gateway, ws_client

SAME = {"expression": "6 * 7"}


async def test_the_same_call_with_the_same_result_five_times_ends_the_turn(
    home: Path, llm: FakeOpenAI
) -> None:
    for n in range(5):
        # the arguments spelled differently: compared as JSON values
        spelled = '{"expression":"6 * 7"}' if n % 2 else '{ "expression": "6 * 7" }'
        llm.add_tool_call("calculator", spelled, call_id=f"c{n}")
    llm.add_text("It is 42.")  # what a sixth model call would have got: the guard stops first
    loaded = make_config(home, llm.base_url)
    async with running_gateway(loaded) as gw, ws_client(gw, "loop") as client:
        reply = await client.ask("what is 6*7?")
        assert reply.startswith("I stopped: I called calculator 5 times in a row")
        assert len(llm.requests) == 5  # the fifth result ended it: no sixth model call

        assert await client.ask("so?") == "It is 42."
        # the next request carries a valid transcript: every call answered, in order
        messages = conversation(llm.requests[-1])
        calls = [
            c["id"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or []
        ]
        results = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
        assert calls == results == [f"c{n}" for n in range(5)]
        assert gw.store is not None
        _, history = await gw.store.history_snapshot("loop")
        assert [m.role for m in history][-4:] == [
            Role.TOOL,
            Role.ASSISTANT,
            Role.USER,
            Role.ASSISTANT,
        ]


async def test_a_changing_result_is_no_loop(home: Path, llm: FakeOpenAI) -> None:
    """Polling a job that is still running: same call, new result each time."""
    for n in range(6):
        llm.add_tool_call("calculator", {"expression": f"{n} + 1"}, call_id=f"c{n}")
    llm.add_text("done")
    loaded = make_config(home, llm.base_url)
    async with running_gateway(loaded) as gw, ws_client(gw, "poll") as client:
        assert await client.ask("count") == "done"
    assert len(llm.requests) == 7


async def test_the_guard_can_be_turned_off(home: Path, llm: FakeOpenAI) -> None:
    for n in range(6):
        llm.add_tool_call("calculator", SAME, call_id=f"c{n}")
    llm.add_text("done")
    loaded = make_config(home, llm.base_url, agents={"default": {"max_identical_tool_calls": 0}})
    async with running_gateway(loaded) as gw, ws_client(gw, "off") as client:
        assert await client.ask("go") == "done"
    assert len(llm.requests) == 7
