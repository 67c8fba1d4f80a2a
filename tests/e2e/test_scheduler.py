"""Scheduled jobs through the real pipeline: agent_task replies in its target
chat, silent_agent_task writes only to its own session, outbound_message sends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent.turn_control import APPROVAL_REFUSED
from storage.sqlite.db import Database
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.fakes.recording_channel import RecordingChannel
from tests.support import conversation, make_config, running_gateway

FAST = {"enabled": True, "tick_resolution_ms": 10}


def _job(job_id: str, kind: str, **fields: Any) -> dict[str, Any]:
    return {"id": job_id, "kind": kind, "schedule": {"type": "delay", "seconds": 0.2}, **fields}


async def _session_messages(db_path: Path, session_id: str) -> list[tuple[str, str]]:
    async with Database(db_path) as db:
        rows = await db.read(
            lambda c: c.execute(
                "SELECT role, content FROM messages WHERE session_id = ? AND role != 'system' ORDER BY seq",
                (session_id,),
            ).fetchall()
        )
    return [(r["role"], r["content"]) for r in rows]


async def test_agent_task_replies_in_its_target_chat(home: Path, llm: FakeOpenAI) -> None:
    job = _job(
        "daily",
        "agent_task",
        target={"channel": "rec", "chat_id": "team"},
        payload={"prompt": "Summarise today", "system_prompt": "You write daily reports."},
    )
    llm.add_text("Today: all good.")
    channel = RecordingChannel()
    loaded = make_config(home, llm.base_url, scheduler={**FAST, "jobs": [job]})
    async with running_gateway(loaded, extra_channels=[channel]):
        sent = await channel.wait_sent(1)
    assert [(s.message.chat_id, s.message.text) for s in sent] == [("team", "Today: all good.")]
    request = llm.requests[0]
    assert conversation(request)[-1] == {"role": "user", "content": "Summarise today"}
    assert {"role": "system", "content": "You write daily reports."} in request["messages"]
    history = await _session_messages(loaded.storage_path, "rec:team")
    assert history == [("user", "Summarise today"), ("assistant", "Today: all good.")]


async def test_silent_task_stays_in_its_own_session_and_notifies_only_on_failure(
    home: Path, llm: FakeOpenAI
) -> None:
    ok_job = _job(
        "bg.ok",
        "silent_agent_task",
        target={"channel": "rec", "chat_id": "team"},
        payload={"prompt": "Collect notes quietly"},
    )
    bad_job = _job(
        "bg.bad",
        "silent_agent_task",
        target={"channel": "rec", "chat_id": "team"},
        payload={"prompt": "This one fails"},
    )

    async def responder(body: dict[str, Any]) -> Reply | None:
        last = conversation(body)[-1]["content"]
        return Reply(status=400) if last == "This one fails" else Reply(text="notes collected")

    llm.responder = responder
    channel = RecordingChannel()
    loaded = make_config(home, llm.base_url, scheduler={**FAST, "jobs": [ok_job, bad_job]})
    async with running_gateway(loaded, extra_channels=[channel]):
        sent = await channel.wait_sent(1)
    assert len(sent) == 1  # only the failure notice
    assert sent[0].message.chat_id == "team"
    assert sent[0].message.text.startswith("Scheduled task bg.bad failed:")
    assert await _session_messages(loaded.storage_path, "rec:scheduler/bg.ok") == [
        ("user", "Collect notes quietly"),
        ("assistant", "notes collected"),
    ]
    assert await _session_messages(loaded.storage_path, "rec:team") == []


async def test_outbound_message_job_sends_directly(home: Path, llm: FakeOpenAI) -> None:
    job = _job(
        "hello",
        "outbound_message",
        target={"channel": "rec", "chat_id": "team"},
        payload={"text": "Stand-up in 5 minutes"},
    )
    channel = RecordingChannel()
    loaded = make_config(home, llm.base_url, scheduler={**FAST, "jobs": [job]})
    async with running_gateway(loaded, extra_channels=[channel]):
        sent = await channel.wait_sent(1)
    assert sent[0].message.text == "Stand-up in 5 minutes"
    assert llm.requests == []


async def test_a_job_naming_an_agent_is_answered_by_that_agent(home: Path, llm: FakeOpenAI) -> None:
    """The job's `agent` key picks agents.<name>; a job without it, and a chat
    message, get the channel's agent."""
    other = _job(
        "by.other",
        "agent_task",
        target={"channel": "rec", "chat_id": "team"},
        payload={"prompt": "Asked of other", "agent": "other"},
    )
    default = _job(
        "by.default",
        "agent_task",
        target={"channel": "rec", "chat_id": "solo"},
        payload={"prompt": "Asked of the default"},
    )
    channel = RecordingChannel()
    loaded = make_config(
        home,
        llm.base_url,
        models={"big": {"model_id": "other-model"}},
        agents={
            "default": {},
            "other": {"model": "big", "system_prompt": "You are the other agent."},
        },
        scheduler={**FAST, "jobs": [other, default]},
    )
    async with running_gateway(loaded, extra_channels=[channel]):
        await channel.wait_sent(2)
        await channel.submit("chat", "and me?")
        await channel.wait_sent(3)
    by_prompt = {conversation(r)[-1]["content"]: r for r in llm.requests}
    asked = by_prompt["Asked of other"]
    assert asked["model"] == "other-model"
    assert asked["messages"][0] == {"role": "system", "content": "You are the other agent."}
    for prompt in ("Asked of the default", "and me?"):
        assert by_prompt[prompt]["model"] == "fake-model"
        assert {"role": "system", "content": "You are the other agent."} not in by_prompt[prompt][
            "messages"
        ]


async def test_a_job_naming_an_unknown_agent_is_told_so_and_runs_nothing(
    home: Path, llm: FakeOpenAI
) -> None:
    """Config jobs are checked at start-up; a job put at run time (the
    scheduler_manage tool's path) can still name an agent that is not there."""
    job = _job(
        "by.nobody",
        "agent_task",
        target={"channel": "rec", "chat_id": "team"},
        payload={"prompt": "Anyone?", "agent": "nobody"},
    )
    channel = RecordingChannel()
    loaded = make_config(home, llm.base_url, scheduler=FAST)
    async with running_gateway(loaded, extra_channels=[channel]) as gw:
        assert gw.scheduler is not None
        put = await gw.scheduler.manage(
            "put", {"job": job}, channel="rec", sender_id="user-team", admin=False
        )
        assert put["ok"] is True
        [sent] = await channel.wait_sent(1)
    assert sent.message.chat_id == "team"
    assert "agent 'nobody'" in sent.message.text
    assert llm.requests == []


async def test_a_silent_task_cannot_wait_for_approval_so_a_held_call_is_refused(
    home: Path, llm: FakeOpenAI
) -> None:
    """Nobody reads a silent job's chat: it must not wait an hour for an answer."""
    job = _job(
        "bg.shell",
        "silent_agent_task",
        target={"channel": "rec", "chat_id": "team"},
        payload={"prompt": "Clean up"},
    )
    llm.add_tool_call("bash", {"command": "touch ran.txt"})
    llm.add_text("could not clean up")
    tools = {"approval": {"tools": {"bash": "always"}}, "bash": {"sandbox": "off"}}
    loaded = make_config(home, llm.base_url, scheduler={**FAST, "jobs": [job]}, tools=tools)
    channel = RecordingChannel()
    async with running_gateway(loaded, extra_channels=[channel]):
        await llm.wait_requests(2)
    assert [m["content"] for m in conversation(llm.requests[1]) if m["role"] == "tool"] == [
        APPROVAL_REFUSED
    ]
    assert not (home / "workspace" / "ran.txt").exists()
    assert channel.sent == []  # no approval request to a chat nobody reads
