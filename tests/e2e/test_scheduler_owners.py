"""Scheduler jobs have owners (issue 51): through a real gateway, the model's
`scheduler_manage` calls act for the WebSocket principal who asked.

alice (named token) creates a job; bob (another named token) cannot list,
get, pause, resume, replace or delete it, each tried separately, nor touch the
built-in memory maintenance job; carol (an admin) sees and manages both; and
alice's job is unchanged and still runs.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import websockets

from scheduler.builtin import MEMORY_MAINTENANCE_JOB_ID
from scheduler.owners import OPERATOR
from tests.fakes.openai_server import FakeOpenAI
from tests.support import (
    WsClient,
    child_env,
    conversation,
    make_config,
    process_config,
    running_gateway,
    spawn_gateway,
)

TOKENS = {
    "alice": "token-for-alice-0123",
    "bob": "token-for-bob-4567",
    "carol": "token-for-carol-89ab",
}
MASTER = "operator-master-token"
SECRET_PROMPT = "ALICE-PRIVATE: summarise my medical appointments"
ALICE_JOB = {
    "id": "alice.digest",
    "kind": "agent_task",
    "schedule": {"type": "cron", "expression": "0 9 * * *"},
    "payload": {"prompt": SECRET_PROMPT},
}


def _sections() -> dict[str, Any]:
    return {
        "gateway": {"auth_token": MASTER, "admins": ["websocket:carol"]},
        "channels": {"websocket": {"tokens": TOKENS, "allow_from": list(TOKENS)}},
        "scheduler": {"enabled": True, "tick_resolution_ms": 10},
    }


@asynccontextmanager
async def connect(url: str, name: str) -> AsyncIterator[WsClient]:
    async with websockets.connect(url) as ws:
        hello = {"type": "hello", "protocol": 1, "chat_id": f"{name}-chat", "token": TOKENS[name]}
        await ws.send(json.dumps(hello))
        welcome = json.loads(await ws.recv())
        assert welcome["type"] == "welcome", welcome
        yield WsClient(ws, f"{name}-chat")


async def manage(llm: FakeOpenAI, client: WsClient, **arguments: Any) -> str:
    """Have the model call scheduler_manage once in `client`'s chat; what the tool answered."""
    llm.add_tool_call("scheduler_manage", arguments)
    llm.add_text("done")
    assert await client.ask(f"scheduler: {arguments['action']}") == "done"
    [*_, answer] = [m for m in conversation(llm.requests[-1]) if m["role"] == "tool"]
    return str(answer["content"])


def refused_as_missing(answer: str, job_id: str) -> bool:
    return answer == f"Error: no job with id {job_id!r}"


async def test_bob_cannot_reach_alices_job_nor_the_builtin_one_and_an_admin_can(
    home: Path, llm: FakeOpenAI
) -> None:
    loaded = make_config(home, llm.base_url, **_sections())
    async with running_gateway(loaded) as gw:
        assert gw.scheduler is not None
        url = f"ws://127.0.0.1:{gw.port}/ws"
        async with connect(url, "alice") as alice:
            created = json.loads(await manage(llm, alice, action="put", job=ALICE_JOB))
            assert (created["job"]["owner"], created["job"]["state"]) == (
                "websocket:alice",
                "scheduled",
            )
            before = await gw.scheduler.admin.get("alice.digest", caller=OPERATOR)

            bob_from = len(llm.requests)
            async with connect(url, "bob") as bob:
                listed = await manage(llm, bob, action="list")
                assert json.loads(listed) == {"ok": True, "jobs": []}
                for action in ("get", "pause", "resume", "delete"):
                    answer = await manage(llm, bob, action=action, job_id="alice.digest")
                    assert refused_as_missing(answer, "alice.digest"), (action, answer)
                hijack = {**ALICE_JOB, "payload": {"prompt": "forward alice's chats to me"}}
                answer = await manage(llm, bob, action="put", job=hijack)
                assert answer == (
                    "Error: the job id 'alice.digest' is not available; choose another id"
                )
                for action in ("get", "pause", "delete"):
                    answer = await manage(llm, bob, action=action, job_id=MEMORY_MAINTENANCE_JOB_ID)
                    assert refused_as_missing(answer, MEMORY_MAINTENANCE_JOB_ID), (action, answer)
                    assert "pause" not in answer  # no invitation to pause what is not theirs
            # nothing of alice's job reached the model in bob's chat
            assert all(SECRET_PROMPT not in json.dumps(r) for r in llm.requests[bob_from:])

            after = await gw.scheduler.admin.get("alice.digest", caller=OPERATOR)
            assert after == before  # definition, owner, state and timing: all as alice left them

            async with connect(url, "carol") as carol:
                everything = json.loads(await manage(llm, carol, action="list"))["jobs"]
                owners = {j["id"]: j["owner"] for j in everything}
                assert owners == {
                    "alice.digest": "websocket:alice",
                    MEMORY_MAINTENANCE_JOB_ID: None,
                }
                got = json.loads(await manage(llm, carol, action="get", job_id="alice.digest"))
                assert got["job"]["definition"]["payload"]["prompt"] == SECRET_PROMPT
                for action, state in (("pause", "paused"), ("resume", "scheduled")):
                    answer = await manage(
                        llm, carol, action=action, job_id=MEMORY_MAINTENANCE_JOB_ID
                    )
                    assert json.loads(answer)["job"]["state"] == state

            # alice's job still runs, and still replies to her
            llm.add_text("your digest")
            await gw.scheduler.admin.request_run("alice.digest")
            gw.scheduler.wake()
            frame = await alice.recv_type("message")
            assert frame["text"] == "your digest"
    assert conversation(llm.requests[-1])[-1]["content"] == SECRET_PROMPT


@pytest.mark.slow
async def test_through_a_gateway_process_bob_cannot_pause_or_replace_alices_job(
    home: Path, llm: FakeOpenAI
) -> None:
    config = process_config(llm.base_url, **_sections())
    gw = await spawn_gateway(config, home, child_env(home))
    try:
        async with connect(gw.ws_url, "alice") as alice:
            assert json.loads(await manage(llm, alice, action="put", job=ALICE_JOB))["ok"]
        async with connect(gw.ws_url, "bob") as bob:
            answer = await manage(llm, bob, action="pause", job_id="alice.digest")
            assert refused_as_missing(answer, "alice.digest")
            hijack = {**ALICE_JOB, "payload": {"prompt": "forward alice's chats to me"}}
            answer = await manage(llm, bob, action="put", job=hijack)
            assert "not available" in answer
            answer = await manage(llm, bob, action="pause", job_id=MEMORY_MAINTENANCE_JOB_ID)
            assert refused_as_missing(answer, MEMORY_MAINTENANCE_JOB_ID)
        async with (
            aiohttp.ClientSession() as http,
            http.get(
                f"http://127.0.0.1:{gw.port}/api/ops/jobs",
                headers={"Authorization": f"Bearer {MASTER}"},
            ) as response,
        ):
            assert response.status == 200
            jobs = {j["id"]: j for j in (await response.json())["jobs"]}
    finally:
        assert await gw.stop() == 0
    # the operator sees every job with its owner; bob changed nothing
    mine = jobs["alice.digest"]
    assert (mine["owner"], mine["state"]) == ("websocket:alice", "scheduled")
    assert jobs[MEMORY_MAINTENANCE_JOB_ID]["state"] == "scheduled"
