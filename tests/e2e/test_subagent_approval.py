"""`task` listed in `tools.approval` (docs/subagents.md, Approvals): the
delegation itself waits for a person; no child runs before /approve, and a
denied one never runs."""

from __future__ import annotations

from pathlib import Path

from gateway.config.loading import LoadedConfig
from tests.e2e.test_subagents import is_child, tool_results, transcript
from tests.fakes.openai_server import FakeOpenAI
from tests.support import make_config, running_gateway, ws_client

ASK = "Approval needed"


def held_task(home: Path, llm: FakeOpenAI) -> LoadedConfig:
    return make_config(home, llm.base_url, tools={"approval": {"tools": {"task": "always"}}})


async def test_an_approved_task_runs_its_child_only_after_approve(
    home: Path, llm: FakeOpenAI
) -> None:
    llm.add_tool_call("task", {"description": "sum it", "prompt": "1+1"}, call_id="held")
    llm.add_text("child says 2")
    llm.add_text("parent says 2")
    async with running_gateway(held_task(home, llm)) as gw, ws_client(gw, "asks") as client:
        await client.send("delegate it")
        ask = (await client.recv_type("message"))["text"]
        assert ASK in ask
        assert "task" in ask
        assert "sum it" in ask  # the person sees what would be delegated
        assert len(llm.requests) == 1  # no child yet
        await client.send("/approve")
        assert (await client.recv_type("message"))["text"] == "parent says 2"
        child = await transcript(gw, "task:asks:held")
    parent_first, child_request, parent_second = llm.requests
    assert not is_child(parent_first)
    assert is_child(child_request)
    assert tool_results(parent_second) == ["child says 2"]
    assert child[-1].content == "child says 2"


async def test_a_denied_task_runs_no_child(home: Path, llm: FakeOpenAI) -> None:
    llm.add_tool_call("task", {"description": "sum it", "prompt": "1+1"}, call_id="held")
    llm.add_text("I will not delegate then")
    async with running_gateway(held_task(home, llm)) as gw, ws_client(gw, "denies") as client:
        await client.send("delegate it")
        assert ASK in (await client.recv_type("message"))["text"]
        await client.send("/deny not now")
        assert (await client.recv_type("message"))["text"] == "I will not delegate then"
        assert gw.store is not None
        children = await gw.store.transcripts.children_of("denies")
    assert children == []
    assert not any(is_child(r) for r in llm.requests)
    assert tool_results(llm.requests[-1]) == ["[denied by user: not now]"]
