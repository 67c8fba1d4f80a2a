"""A pending approval survives SIGKILL of a real `picobot gateway` process."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import pytest

from storage.sqlite.db import Database
from tests.e2e.test_crash import Client, _config
from tests.fakes.openai_server import FakeOpenAI
from tests.support import child_env, newest, spawn_gateway

pytestmark = pytest.mark.slow

COUNT = "echo ran >> runs.txt"


def setup(llm: FakeOpenAI, home: Path) -> tuple[dict[str, Any], dict[str, str], Path]:
    """The gateway's config (bash always asks), its environment, and the file
    each run of COUNT adds a line to."""
    config = _config(llm)
    config["tools"] = {"approval": {"tools": {"bash": "always"}}, "bash": {"sandbox": "off"}}
    return config, child_env(home), home / "workspace" / "runs.txt"


async def test_sigkill_while_an_approval_is_pending_then_approve_runs_the_call_once(
    home: Path, llm: FakeOpenAI
) -> None:
    llm.add_tool_call("bash", {"command": COUNT})
    llm.add_text("Ran it.")
    config, env, runs = setup(llm, home)
    gw = await spawn_gateway(config, home, env)
    client = await Client.connect(gw, "kill-1")
    await client.send("q1", "count a run")
    [ask] = await client.collect(1, timeout=20)
    assert "Approval needed (#1)" in ask["text"]
    assert ask["reply_to"] == "q1"
    assert await gw.stop(signal.SIGKILL) == -signal.SIGKILL
    await client.ws.close()
    assert not runs.exists()

    gw2 = await spawn_gateway(config, home, env)
    try:
        again = await Client.connect(gw2, "kill-1")
        await again.send("a1", "/approve 1")
        replies = await again.collect(1, timeout=20, linger=0.5)
        await again.ws.close()
    finally:
        assert await gw2.stop() == 0
    # the request may be delivered again after the kill (at least once); the answer once
    finals = [r for r in replies if "Approval needed" not in r["text"]]
    assert [r["text"] for r in finals] == ["Ran it."]
    assert runs.read_text() == "ran\n"  # once
    assert len(llm.requests) == 2
    assert newest(llm.requests[1])["role"] == "tool"
    async with Database(home / "storage" / "sessions.db") as db:
        states = await db.read(
            lambda c: c.execute("SELECT state, decision FROM approvals").fetchall()
        )
    assert [tuple(s) for s in states] == [("done", "approve")]


async def test_sigkill_while_an_approved_call_runs_never_runs_it_again(
    home: Path, llm: FakeOpenAI
) -> None:
    llm.add_tool_call("bash", {"command": f"{COUNT}; sleep 5"})
    llm.add_text("It was interrupted.")
    config, env, runs = setup(llm, home)
    gw = await spawn_gateway(config, home, env)
    client = await Client.connect(gw, "kill-2")
    await client.send("q1", "count a run, slowly")
    await client.collect(1, timeout=20)
    await client.send("a1", "/approve")
    async with asyncio.timeout(20):  # the call is running (no event for it: look every 20 ms)
        while not runs.exists():
            await asyncio.sleep(0.02)
    assert await gw.stop(signal.SIGKILL) == -signal.SIGKILL
    await client.ws.close()

    gw2 = await spawn_gateway(config, home, env)
    try:
        again = await Client.connect(gw2, "kill-2")
        replies = await again.collect(1, timeout=20, linger=0.5)
        await again.ws.close()
    finally:
        assert await gw2.stop() == 0
    finals = [r["text"] for r in replies if "Approval needed" not in r["text"]]
    assert finals == ["It was interrupted."]
    assert runs.read_text() == "ran\n"  # not run again after the restart
    assert newest(llm.requests[1]) == {
        "role": "tool",
        "tool_call_id": newest(llm.requests[1])["tool_call_id"],
        "content": "[interrupted]",
    }
