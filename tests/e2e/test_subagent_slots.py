"""Sub-agents and the run cap through the whole gateway (docs/subagents.md,
Limits): a child holds a run slot — its turn's first child borrows the
parent's — and a child that gets none in `subagents.slot_wait_secs` is an
error result, never a hung turn."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agent.messages import CANCELLED_RESULT, Role
from tests.e2e.test_subagents import dangling, is_child, tool_results, transcript
from tests.fakes.openai_server import FakeOpenAI, Reply, last_user_text
from tests.support import make_config, running_gateway, ws_client


def tasks(count: int) -> list[tuple[str, dict[str, Any]]]:
    return [("task", {"description": f"job {n}", "prompt": str(n)}) for n in range(count)]


TWO_TASKS = tasks(2)


def capped(home: Path, llm: FakeOpenAI, slot_wait_secs: float, cap: int = 1) -> Any:
    return make_config(
        home,
        llm.base_url,
        gateway={"max_concurrent_runs": cap},
        subagents={"slot_wait_secs": slot_wait_secs},
    )


@pytest.mark.parametrize("cap", [1, 2])
async def test_children_hold_run_slots_the_first_in_its_parents_and_one_more_gets_none(
    home: Path, llm: FakeOpenAI, cap: int
) -> None:
    """At a cap of 1 the only child that runs is in its parent's slot (no
    deadlock); at 2 a second runs in the free slot; the one more than the cap
    allows is an error result while the others still run."""
    release = asyncio.Event()
    children: list[str] = []

    async def respond(body: dict[str, Any]) -> Reply | None:
        if not is_child(body):
            return None
        children.append(last_user_text(body["messages"]))
        await release.wait()  # a running child keeps its slot
        return Reply(text="child done")

    llm.responder = respond
    llm.add_tool_calls(tasks(cap + 1))
    llm.add_text("some of them ran")
    try:
        async with (
            running_gateway(capped(home, llm, slot_wait_secs=0.2, cap=cap)) as gw,
            ws_client(gw, "capped") as client,
        ):
            await client.send("do both")
            async with asyncio.timeout(10):
                while True:  # the last child gives up while the others still run
                    frame = await client.recv_type("tool")
                    if frame["name"] == "task" and frame["status"] == "error":
                        break
            release.set()
            reply = await client.recv_type("message")
            assert gw.store is not None
            opened = await gw.store.transcripts.children_of("capped")
            parent = await transcript(gw, "capped")
    finally:
        release.set()
    assert reply["text"] == "some of them ran"
    assert len(children) == cap  # the one more never reached the model
    errors, done = [], []
    for result in tool_results(llm.requests[-1]):
        (errors if result.startswith("Error: ") else done).append(result)
    [error] = errors
    assert error.startswith("Error: [no sub-agent slot within 0.2s]")
    assert done == ["child done"] * cap
    assert len(opened) == cap  # a child without a slot leaves no transcript
    assert dangling(parent) == []


async def test_stop_cancels_a_child_waiting_for_a_slot(home: Path, llm: FakeOpenAI) -> None:
    arrived = asyncio.Event()
    never = asyncio.Event()

    async def respond(body: dict[str, Any]) -> Reply | None:
        if not is_child(body):
            return None
        arrived.set()
        await never.wait()
        return Reply(text="unreachable")

    llm.responder = respond
    llm.add_tool_calls(TWO_TASKS)
    try:
        async with (
            running_gateway(capped(home, llm, slot_wait_secs=600)) as gw,
            ws_client(gw, "waits") as client,
        ):
            await client.send("do both")
            async with asyncio.timeout(10):
                await arrived.wait()  # one child runs; the other waits for the slot
            await client.send("/stop")
            stopped = await client.recv_type("message")
            assert "stop" in stopped["text"].lower()
            assert await client.ask("hello again") == "echo: hello again"
            parent = await transcript(gw, "waits")
    finally:
        never.set()
    assert [m.content for m in parent if m.role is Role.TOOL] == [CANCELLED_RESULT] * 2
    assert dangling(parent) == []
