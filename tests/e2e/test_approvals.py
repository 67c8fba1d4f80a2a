"""Tool approval through a real gateway and the fake LLM (docs/approvals.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from agent.turn_control import APPROVAL_REFUSED
from gateway.config.core import ConfigError
from gateway.config.loading import LoadedConfig
from storage.sql.memory.memories import Scope
from tests.fakes.openai_server import FakeOpenAI
from tests.support import WsClient, conversation, make_config, newest, running_gateway, ws_client

MARK = "touch approved.txt"
ASK = "Approval needed"


def approval_config(home: Path, llm: FakeOpenAI, **approval: Any) -> LoadedConfig:
    rules = {"bash": {"mode": "always", "allow": ["ls", "cat", "git status"]}}
    return make_config(
        home,
        llm.base_url,
        tools={"approval": {"tools": rules, **approval}, "bash": {"sandbox": "off"}},
    )


async def next_text(client: WsClient) -> str:
    return str((await client.recv_type("message"))["text"])


async def test_a_held_bash_call_runs_only_after_approve(home: Path, llm: FakeOpenAI) -> None:
    llm.add_tool_call("bash", {"command": MARK})
    llm.add_text("Done: the file is there.")
    async with running_gateway(approval_config(home, llm)) as gw, ws_client(gw) as client:
        await client.send("make the file")
        ask = await next_text(client)
        assert ASK in ask
        assert MARK in ask
        assert "/approve" in ask
        assert not (home / "workspace" / "approved.txt").exists()
        assert len(llm.requests) == 1  # the turn is stopped: no model call, no tool run
        await client.send("/approve")
        assert await next_text(client) == "Done: the file is there."
    assert (home / "workspace" / "approved.txt").exists()
    result = newest(llm.requests[1])
    assert result["role"] == "tool"
    assert "denied" not in result["content"]


async def test_deny_with_a_reason_reaches_the_model(home: Path, llm: FakeOpenAI) -> None:
    llm.add_tool_call("bash", {"command": MARK})
    llm.add_text("All right, I left it.")
    async with running_gateway(approval_config(home, llm)) as gw, ws_client(gw) as client:
        await client.send("make the file")
        assert ASK in await next_text(client)
        await client.send("/deny because")
        assert await next_text(client) == "All right, I left it."
    assert not (home / "workspace" / "approved.txt").exists()
    result = newest(llm.requests[1])
    assert result == {
        "role": "tool",
        "tool_call_id": result["tool_call_id"],
        "content": "[denied by user: because]",
    }


async def test_an_unanswered_approval_times_out_as_denied(home: Path, llm: FakeOpenAI) -> None:
    llm.add_tool_call("bash", {"command": MARK})
    llm.add_text("Nobody said yes, so I did not.")
    loaded = approval_config(home, llm, timeout_secs=0.5)
    async with running_gateway(loaded) as gw, ws_client(gw) as client:
        await client.send("make the file")
        assert "0.5 s" in await next_text(client)
        assert await next_text(client) == "Nobody said yes, so I did not."
    assert not (home / "workspace" / "approved.txt").exists()
    assert newest(llm.requests[1])["content"].startswith("[denied: nobody approved it")


async def test_an_allowed_command_runs_without_asking(home: Path, llm: FakeOpenAI) -> None:
    llm.add_tool_call("bash", {"command": "ls -la"})
    llm.add_text("Listed.")
    async with running_gateway(approval_config(home, llm)) as gw, ws_client(gw) as client:
        assert await client.ask("list the files") == "Listed."
    assert "denied" not in newest(llm.requests[1])["content"]


async def test_an_allowed_prefix_with_a_shell_operator_still_asks(
    home: Path, llm: FakeOpenAI
) -> None:
    llm.add_tool_call("bash", {"command": f"ls; {MARK}"})
    async with running_gateway(approval_config(home, llm)) as gw, ws_client(gw) as client:
        await client.send("list the files")
        assert ASK in await next_text(client)
    assert not (home / "workspace" / "approved.txt").exists()


async def test_websocket_approval_request_and_approve_frames(home: Path, llm: FakeOpenAI) -> None:
    llm.add_tool_call("bash", {"command": MARK})
    llm.add_text("Understood, not now.")
    async with running_gateway(approval_config(home, llm)) as gw, ws_client(gw) as client:
        asked = await client.send("make the file")
        request = await client.recv_type("approval_request")
        assert request["approval_id"] == 1
        assert request["tools"] == ["bash"]
        assert request["labels"] == {"approve": "Approve", "deny": "Deny"}
        assert request["reply_to"] == asked
        assert MARK in request["text"]
        text = await client.recv()  # the same request as text, for clients without buttons
        assert text["type"] == "message"
        assert text["text"] == request["text"]
        await client.ws.send(json.dumps({"type": "approve", "id": "x", "approval_id": "1"}))
        error = await client.recv_type("error")
        assert error["code"] == "bad_frame"
        assert error["id"] == "x"
        frame = {"type": "approve", "id": "a-1", "approval_id": 1, "decision": "deny"}
        await client.ws.send(json.dumps(frame | {"reason": "not today"}))
        assert (await client.recv_type("ack"))["id"] == "a-1"
        reply = await client.recv_type("message")
        assert reply["text"] == "Understood, not now."
        assert reply["reply_to"] == asked
    assert newest(llm.requests[1])["content"] == "[denied by user: not today]"


async def test_a_new_message_instead_of_an_answer_refuses_the_calls(
    home: Path, llm: FakeOpenAI
) -> None:
    llm.add_tool_call("bash", {"command": MARK})
    llm.add_text("OK, something else then.")
    async with running_gateway(approval_config(home, llm)) as gw, ws_client(gw) as client:
        await client.send("make the file")
        assert ASK in await next_text(client)
        assert await client.ask("no wait, tell me a joke") == "OK, something else then."
        assert "not waiting" in await client.ask("/approve 1")
        assert await client.ask("/status")  # commands work as ever
    assert not (home / "workspace" / "approved.txt").exists()
    tool, user = conversation(llm.requests[1])[-2:]
    assert tool["role"] == "tool"
    assert tool["content"] == "[denied: the user sent a new message instead of approving]"
    assert user == {"role": "user", "content": "no wait, tell me a joke"}


async def test_only_the_asker_or_an_admin_may_answer(home: Path, llm: FakeOpenAI) -> None:
    llm.add_tool_call("bash", {"command": MARK})
    llm.add_text("Done by the admin's leave.")
    loaded = approval_config(home, llm)
    loaded = make_config(
        home,
        llm.base_url,
        tools=loaded.config.tools.model_dump(mode="json"),
        gateway={"admins": ["websocket:boss"]},
    )
    # one chat, three people: the operator's connections name each frame's
    # sender (a named token's chats are its own: tests/e2e/test_ws_chat_owners.py)
    async with (
        running_gateway(loaded) as gw,
        ws_client(gw, "team") as alice,
        ws_client(gw, "team") as bob,
        ws_client(gw, "team") as boss,
    ):
        await alice.send("make the file", sender_id="alice")
        assert ASK in await next_text(alice)
        assert "Only the person who asked" in await bob.ask("/approve", sender_id="bob")
        assert not (home / "workspace" / "approved.txt").exists()
        await boss.send("/approve", sender_id="boss")
        seen = [await next_text(boss)]  # every connection of the chat sees every message
        while seen[-1] != "Done by the admin's leave.":
            seen.append(await next_text(boss))
        assert len(seen) == 3  # the request, bob's refusal, the reply
    assert (home / "workspace" / "approved.txt").exists()


def test_a_misspelt_tool_name_is_refused_with_the_config(home: Path, llm: FakeOpenAI) -> None:
    expected = "tools.approval.tools: no tool named 'bahs' (did you mean 'bash'?)"
    with pytest.raises(ConfigError, match=re.escape(expected)):
        make_config(home, llm.base_url, tools={"approval": {"tools": {"bahs": "always"}}})


async def test_shell_names_the_bash_tool_too(home: Path, llm: FakeOpenAI) -> None:
    llm.add_tool_call("bash", {"command": MARK})
    loaded = make_config(home, llm.base_url, tools={"approval": {"tools": {"shell": "always"}}})
    async with running_gateway(loaded) as gw, ws_client(gw) as client:
        await client.send("make the file")
        assert ASK in await next_text(client)


async def test_a_sub_agent_cannot_run_a_call_that_needs_approval(
    home: Path, llm: FakeOpenAI
) -> None:
    """A child has no chat to ask in: the held call is refused, never run, and
    the child's other calls in the batch still run."""
    llm.add_tool_call(
        "task",
        {"description": "tidy up", "prompt": "remove it", "subagent_type": "general"},
        call_id="call-task",
    )
    llm.add_tool_calls(
        [("bash", {"command": "touch ran.txt"}), ("calculator", {"expression": "6*7"})]
    )
    llm.add_text("child: could not")
    llm.add_text("parent: done")
    async with running_gateway(approval_config(home, llm)) as gw, ws_client(gw) as client:
        assert await client.ask("clean the workspace") == "parent: done"
    results = [m["content"] for m in llm.requests[2]["messages"] if m["role"] == "tool"]
    assert results == [APPROVAL_REFUSED, "42"]
    assert not (home / "workspace" / "ran.txt").exists()
    assert len(llm.requests) == 4  # parent, child twice, parent


async def test_a_session_waiting_for_approval_cannot_be_deleted(
    home: Path, llm: FakeOpenAI
) -> None:
    """Deleting it would leave the paused turn nothing to carry on in, and
    every later message of the chat would stall on it."""
    llm.add_tool_call("bash", {"command": MARK})
    llm.add_text("made it")
    async with running_gateway(approval_config(home, llm)) as gw, ws_client(gw) as client:
        await client.send("make the file")
        assert ASK in await next_text(client)
        await client.send("/delete")
        assert "waiting for approval" in await next_text(client)
        await client.send("/approve")
        assert await next_text(client) == "made it"
    assert (home / "workspace" / "approved.txt").exists()


async def test_an_approved_result_stays_in_the_history_when_the_next_call_fails(
    home: Path, llm: FakeOpenAI
) -> None:
    """The turn that carries on fails (its messages are hidden); the call that
    ran must still read as run, or the model asks to run it again."""
    llm.add_tool_call("bash", {"command": "echo ran-once && touch approved.txt"})
    llm.add_error(500, {"error": {"message": "down"}})
    llm.add_text("it is there")
    async with running_gateway(approval_config(home, llm)) as gw, ws_client(gw) as client:
        await client.send("make the file")
        assert ASK in await next_text(client)
        await client.send("/approve")
        await next_text(client)  # the failure notice
        assert await client.ask("is it done?") == "it is there"
    results = [m["content"] for m in conversation(llm.requests[-1]) if m["role"] == "tool"]
    assert len(results) == 1
    assert "ran-once" in results[0]


async def test_calls_an_admin_approves_run_as_the_person_who_asked(
    home: Path, llm: FakeOpenAI
) -> None:
    """The memory a held `memory_manage` call writes is the asker's (its scope
    is the ToolContext's sender), not the admin's who approved it."""
    fact = {"action": "put", "namespace": "profile", "memory_key": "drink", "content": "tea"}
    llm.add_tool_call("memory_manage", fact)
    llm.add_text("I will remember that you like tea.")
    loaded = make_config(
        home,
        llm.base_url,
        tools={"approval": {"tools": {"memory_manage": "always"}}},
        gateway={"admins": ["websocket:boss"]},
    )
    async with (  # the operator's connections name the senders, as above
        running_gateway(loaded) as gw,
        ws_client(gw, "team") as alice,
        ws_client(gw, "team") as boss,
    ):
        await alice.send("remember that I like tea", sender_id="alice")
        assert ASK in await next_text(alice)
        assert gw.store is not None
        assert await gw.store.memories.scopes() == []  # held: nothing written yet
        await boss.send("/approve", sender_id="boss")
        while (await next_text(alice)) != "I will remember that you like tea.":
            pass
        scopes = [info.scope for info in await gw.store.memories.scopes()]
        alices = Scope("user", "websocket:alice")  # agent.memory.types.MemoryScope.of_user
        assert scopes == [alices]
        found = await gw.store.memories.get(alices, "profile", "drink")
        assert found is not None
        assert found.content == "tea"
    assert "denied" not in newest(llm.requests[1])["content"]
