"""Sub-agents through the whole gateway (docs/subagents.md): the fake LLM plays
the parent and the child; what it records shows each request."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agent.messages import CANCELLED_RESULT, ChatMessage, Role
from agent.subagents.types import EXPLORE_TOOLS
from gateway.app import Gateway
from storage.sqlite.db import Database
from storage.store import Store
from tests.fakes.openai_server import FakeOpenAI, Reply, last_user_text
from tests.support import make_config, running_gateway, ws_client

CHILD_MARK = "You are a sub-agent"


def tool_names(body: dict[str, Any]) -> set[str]:
    return {t["function"]["name"] for t in body.get("tools", [])}


def is_child(body: dict[str, Any]) -> bool:
    return any(
        m["role"] == "system" and CHILD_MARK in str(m.get("content")) for m in body["messages"]
    )


def tool_results(body: dict[str, Any]) -> list[str]:
    return [str(m["content"]) for m in body["messages"] if m["role"] == "tool"]


def write_subagent(root: Path, name: str, front: str, body: str = "") -> None:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SUBAGENT.md").write_text(f"---\n{front.strip()}\n---\n{body}\n", encoding="utf-8")


async def transcript(gw: Gateway, session_id: str) -> list[ChatMessage]:
    assert gw.store is not None
    return await gw.store.transcripts.session_messages(session_id)


def dangling(history: list[ChatMessage]) -> list[str]:
    answered = {m.tool_call_id for m in history if m.role is Role.TOOL}
    return [c.id for m in history for c in m.tool_calls if c.id not in answered]


async def outbox_texts(gw: Gateway, chat_id: str) -> list[str]:
    assert gw.db is not None
    rows = await gw.db.read(
        lambda c: c.execute(
            "SELECT text FROM outbox WHERE chat_id = ? ORDER BY id", (chat_id,)
        ).fetchall()
    )
    return [r[0] for r in rows]


async def test_explore_child_gets_read_only_tools_and_its_text_reaches_the_parent(
    home: Path, llm: FakeOpenAI
) -> None:
    llm.add_tool_call(
        "task",
        {
            "description": "find the answer",
            "prompt": "look in notes.txt",
            "subagent_type": "explore",
        },
        call_id="call-explore",
    )
    llm.add_tool_call("write", {"path": "pwned.txt", "content": "x"}, call_id="call-write")
    llm.add_text("the answer is 42")
    llm.add_text("final: 42")
    async with (
        running_gateway(make_config(home, llm.base_url)) as gw,
        ws_client(gw, "chat-x") as client,
    ):
        assert await client.ask("what is the answer?") == "final: 42"
        assert await outbox_texts(gw, "chat-x") == ["final: 42"]  # one reply, nothing else
        child = await transcript(gw, "task:chat-x:call-explore")
        parent = await transcript(gw, "chat-x")
    parent_first, child_first, child_second, parent_second = llm.requests
    assert "task" in tool_names(parent_first)
    assert tool_names(child_first) == EXPLORE_TOOLS
    [template] = [m["content"] for m in child_first["messages"] if CHILD_MARK in str(m["content"])]
    assert "Task: find the answer" in template
    assert "look in notes.txt" in template
    assert "{{" not in template
    assert tool_results(child_second) == ["Error: unknown tool 'write'"]
    assert not (home / "workspace" / "pwned.txt").exists()
    [result] = tool_results(parent_second)
    assert result == "the answer is 42"
    # the child's transcript is stored like a turn's, the parent's names it by call id
    assert [m.role for m in child] == [
        Role.SYSTEM, Role.USER, Role.ASSISTANT, Role.TOOL, Role.ASSISTANT,
    ]  # fmt: skip
    assert child[-1].content == "the answer is 42"
    assert [m.tool_call_id for m in parent if m.role is Role.TOOL] == ["call-explore"]


async def test_project_subagent_overrides_user_one_and_unknown_type_runs_as_general(
    home: Path, llm: FakeOpenAI
) -> None:
    front = (
        "description: {who} reviewer\n"
        "prompt_template: |\n  {who} review of {{{{description}}}}; focus: {{{{prompt}}}}\n"
        "allowed_tools: [read, calculator]\n"
    )
    write_subagent(home / "subagents", "review", front.format(who="user"), "user body")
    project = home / "workspace" / ".picobot" / "subagents"
    write_subagent(project, "review", front.format(who="project"), "project body")
    llm.add_tool_call(
        "task", {"description": "src/auth", "prompt": "injections", "subagent_type": "review"}
    )
    llm.add_text("reviewed")
    llm.add_text("done 1")
    llm.add_tool_call("task", {"description": "anything", "prompt": "go", "subagent_type": "nope"})
    llm.add_text("general did it")
    llm.add_text("done 2")
    async with (
        running_gateway(make_config(home, llm.base_url)) as gw,
        ws_client(gw) as client,
    ):
        assert await client.ask("review please") == "done 1"
        assert await client.ask("and now?") == "done 2"
    first = llm.requests[0]
    assert "- review: project reviewer" in str(first["tools"])  # listed in task's description
    child = llm.requests[1]
    assert tool_names(child) == {"read", "calculator"}
    [system] = [m["content"] for m in child["messages"] if "review of" in str(m["content"])]
    assert system.startswith("project review of src/auth; focus: injections")
    assert system.rstrip().endswith("project body")
    assert "user" not in system
    general = llm.requests[4]
    assert tool_names(general) == tool_names(llm.requests[3]) - {"task"}
    assert {"write", "bash"} <= tool_names(general)
    fallback = tool_results(llm.requests[5])[-1]
    assert fallback.startswith("(There is no sub-agent type 'nope'; it ran as general.)")
    assert fallback.endswith("general did it")


async def test_disabled_discovery_keeps_builtin_types_and_task_can_be_disabled(
    home: Path, llm: FakeOpenAI
) -> None:
    write_subagent(home / "subagents", "custom", "description: mine\nprompt_template: x")
    config = make_config(home, llm.base_url, subagents={"enabled": False})
    async with running_gateway(config) as gw, ws_client(gw) as client:
        await client.ask("hi")
    description = next(
        t["function"]["description"]
        for t in llm.requests[0]["tools"]
        if t["function"]["name"] == "task"
    )
    assert "- general:" in description
    assert "- explore:" in description
    assert "custom" not in description
    config = make_config(home, llm.base_url, tools={"disabled": ["task"]})
    async with running_gateway(config) as gw, ws_client(gw) as client:
        await client.ask("hi again")
    assert "task" not in tool_names(llm.requests[-1])


async def test_a_child_out_of_time_gives_the_parent_an_error_and_no_dangling_call(
    home: Path, llm: FakeOpenAI
) -> None:
    write_subagent(
        home / "subagents",
        "slow",
        "description: slow one\nprompt_template: '{{description}}'\n"
        "allowed_tools: [bash]\nmax_execution_secs: 1",
    )
    llm.add_tool_call(
        "task", {"description": "wait", "prompt": "sleep", "subagent_type": "slow"}, call_id="t1"
    )
    llm.add_tool_call("bash", {"command": "sleep 30"}, call_id="b1")  # the child: still running
    llm.add_text("it timed out, sorry")
    config = make_config(home, llm.base_url, tools={"bash": {"sandbox": "off"}})
    async with running_gateway(config) as gw, ws_client(gw, "slow-chat") as client:
        assert await client.ask("try it") == "it timed out, sorry"
        child = await transcript(gw, "task:slow-chat:t1")
        parent = await transcript(gw, "slow-chat")
    [result] = tool_results(llm.requests[2])
    assert result.startswith("Error: the sub-agent did not finish within 1s")
    assert dangling(child) == []
    assert dangling(parent) == []
    assert [(m.role, m.content) for m in child[-2:]] == [
        (Role.TOOL, CANCELLED_RESULT),
        (Role.ASSISTANT, "[timed out after 1s]"),
    ]


async def test_two_tasks_in_one_batch_overlap_and_stop_cancels_both(
    home: Path, llm: FakeOpenAI
) -> None:
    children_in = asyncio.Condition()
    arrived: list[str] = []
    never = asyncio.Event()

    async def respond(body: dict[str, Any]) -> Reply | None:
        if not is_child(body):
            return None  # the script, then echo
        async with children_in:
            arrived.append(last_user_text(body["messages"]))
            children_in.notify_all()
        await never.wait()  # both stay running until /stop
        return Reply(text="unreachable")

    llm.responder = respond
    llm.add_tool_calls(
        [
            ("task", {"description": "job A", "prompt": "a"}),
            ("task", {"description": "job B", "prompt": "b"}),
        ]
    )
    try:
        async with (
            running_gateway(make_config(home, llm.base_url)) as gw,
            ws_client(gw, "two") as client,
        ):
            await client.send("do both")
            async with asyncio.timeout(10), children_in:
                # both children are waiting on the model at the same time
                await children_in.wait_for(lambda: len(arrived) == 2)
            assert sorted(arrived) == ["job A", "job B"]
            await client.send("/stop")
            stopped = await client.recv_type("message")
            assert "stop" in stopped["text"].lower()
            assert await client.ask("hello again") == "echo: hello again"
            assert gw.store is not None
            children = await gw.store.transcripts.children_of("two")
            histories = [await transcript(gw, c.id) for c in children]
            parent = await transcript(gw, "two")
    finally:
        never.set()
    assert len(children) == 2
    for history in histories:
        assert history[-1].content == CANCELLED_RESULT
        assert dangling(history) == []
    assert [m.content for m in parent if m.role is Role.TOOL] == [CANCELLED_RESULT] * 2


async def test_child_transcripts_are_readable_after_a_restart(home: Path, llm: FakeOpenAI) -> None:
    llm.add_tool_call("task", {"description": "d", "prompt": "p"}, call_id="keep")
    llm.add_text("child text")
    llm.add_text("parent text")
    async with running_gateway(make_config(home, llm.base_url)) as gw, ws_client(gw) as client:
        assert await client.ask("go") == "parent text"
    async with Database(home / "storage" / "sessions.db") as db:
        store = Store(db)
        [child] = await store.transcripts.children_of("chat-1")
        messages = await store.transcripts.session_messages(child.id)
    assert child.id == "task:chat-1:keep"
    assert child.title == "d"
    assert messages[-1].content == "child text"


@pytest.fixture(autouse=True)
def _quiet_home(home: Path) -> None:
    (home / "workspace").mkdir(exist_ok=True)


async def test_a_child_whose_model_fails_gives_the_parent_an_error_result(
    home: Path, llm: FakeOpenAI
) -> None:
    llm.add_tool_call("task", {"description": "d", "prompt": "p"}, call_id="bad")
    llm.add_error(400)
    llm.add_text("the helper failed")
    async with running_gateway(make_config(home, llm.base_url)) as gw, ws_client(gw) as client:
        assert await client.ask("go") == "the helper failed"
        child = await transcript(gw, "task:chat-1:bad")
    assert tool_results(llm.requests[2]) == ["Error: the sub-agent's model call failed"]
    assert child[-1].content == "[failed: the model call failed]"


async def test_a_child_may_message_the_parent_chat(home: Path, llm: FakeOpenAI) -> None:
    llm.add_tool_call("task", {"description": "d", "prompt": "p"}, call_id="talk")
    llm.add_tool_call("send_session_message", {"text": "halfway there"})  # the child
    llm.add_text("child done")
    llm.add_text("all done")
    async with running_gateway(make_config(home, llm.base_url)) as gw, ws_client(gw) as client:
        assert await client.ask("go") == "all done"
        assert await outbox_texts(gw, "chat-1") == ["halfway there", "all done"]
    assert tool_results(llm.requests[2]) == ["Sent to websocket:chat-1."]
