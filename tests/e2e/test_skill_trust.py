"""Skill roots and skill files against a prompt-injected model (issue 51,
items 3 and 4), through a real `picobot gateway` process.

The fake LLM scripts the tool calls an injected model would make: plant a
link at a skill root with `bash`, then `read` host files through it or point
`skill_manage` at `$PICOBOT_HOME`. Then hostile SKILL.md files (a FIFO, a link
to /dev/zero, a 300 MB sparse file, a YAML alias bomb) must cost that skill
only: other chats are answered, /health stays fast, memory stays flat, and a
restart with the files in place starts and answers.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import websockets

from tests.fakes.openai_server import FakeOpenAI
from tests.skills.helpers import BOMB
from tests.support import GatewayProcess, child_env, process_config, spawn_gateway

pytestmark = [pytest.mark.slow]

HOST_SECRET = "sk-host-env-secret-91c3a7"  # in a file outside the workspace
CONFIG_SECRET = "config-token-skill-trust-4e4e"  # gateway.auth_token, only in config.json
BWRAP = pytest.param(
    "bwrap",
    marks=pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed"),
)


def _config(llm: FakeOpenAI, sandbox: str, home: Path) -> dict[str, Any]:
    return process_config(
        llm.base_url,
        api_key="${OPENAI_API_KEY}",
        gateway={"shutdown_timeout_secs": 5, "auth_token": CONFIG_SECRET},
        tools={"workspace": str(home / "workspace"), "bash": {"sandbox": sandbox}},
        skills={"check_interval_secs": 0},  # every turn looks at the disk
    )


class Chat:
    def __init__(self, ws: websockets.ClientConnection, llm: FakeOpenAI) -> None:
        self.ws = ws
        self.llm = llm
        self._n = 0

    async def say(self, text: str, timeout: float = 60) -> str:
        self._n += 1
        msg_id = f"m{self._n}"
        await self.ws.send(json.dumps({"type": "message", "id": msg_id, "text": text}))
        async with asyncio.timeout(timeout):
            while True:
                frame = json.loads(await self.ws.recv())
                if frame["type"] == "message" and frame.get("reply_to") == msg_id:
                    return str(frame.get("text", ""))

    async def call(self, tool: str, args: dict[str, Any]) -> str:
        """One scripted tool call; the tool result the model got back."""
        self.llm.add_tool_call(tool, args)
        self.llm.add_text("done")
        await self.say(f"please {tool}")
        results = [m["content"] for m in self.llm.requests[-1]["messages"] if m["role"] == "tool"]
        return str(results[-1])


async def _connect(gw: GatewayProcess, llm: FakeOpenAI, chat_id: str) -> Chat:
    ws = await websockets.connect(gw.ws_url)
    await ws.send(json.dumps({"type": "hello", "chat_id": chat_id, "token": CONFIG_SECRET}))
    assert json.loads(await ws.recv())["type"] == "welcome"
    return Chat(ws, llm)


@pytest.fixture
def env(home: Path, tmp_path: Path) -> dict[str, str]:
    user_home = tmp_path / "user-home"  # ~/.agents, ~/.openclaw: not the real ones
    user_home.mkdir()
    return child_env(home, OPENAI_API_KEY="sk-test-key", HOME=str(user_home))


@pytest.fixture
async def started(
    home: Path, llm: FakeOpenAI, env: dict[str, str], request: pytest.FixtureRequest
) -> AsyncIterator[tuple[GatewayProcess, Chat]]:
    gw = await spawn_gateway(_config(llm, request.param, home), home, env)
    chat = await _connect(gw, llm, "injected")
    try:
        yield gw, chat
    finally:
        await chat.ws.close()
        if gw.proc.returncode is None:
            await gw.stop()


@pytest.mark.parametrize("started", [BWRAP, "off"], indirect=True)
async def test_a_linked_skill_root_reaches_no_host_file(
    home: Path, tmp_path: Path, started: tuple[GatewayProcess, Chat]
) -> None:
    _, chat = started
    ws = home / "workspace"
    secret = tmp_path / "host" / "provider.env"
    secret.parent.mkdir()
    secret.write_text(f"OPENAI_API_KEY={HOST_SECRET}\n")
    planted = await chat.call(
        "bash", {"command": "mkdir -p .agents && ln -s / .agents/skills && ls -l .agents"}
    )
    assert "skills -> /" in planted  # the link is really there
    config = home / "config.json"
    results = [
        await chat.call("read", {"path": path})
        for path in (
            f"{ws}/.agents/skills{secret}",
            f".agents/skills{secret}",
            f"{ws}/.agents/skills{config}",
            str(secret),
            str(config),
        )
    ]
    for result in results:
        assert HOST_SECRET not in result
        assert CONFIG_SECRET not in result
    assert "symbolic link" in results[0]


@pytest.mark.parametrize("started", [BWRAP, "off"], indirect=True)
async def test_skill_manage_through_a_linked_root_leaves_the_home_intact(
    home: Path, started: tuple[GatewayProcess, Chat]
) -> None:
    _, chat = started
    await chat.say("remember this chat")
    storage_before = sorted(p.name for p in (home / "storage").iterdir())
    assert "sessions.db" in storage_before
    planted = await chat.call(
        "bash", {"command": "mkdir -p .picobot && ln -s ../.. .picobot/skills && ls -l .picobot"}
    )
    assert "skills -> ../.." in planted
    created = await chat.call(
        "skill_manage",
        {"action": "create", "name": "storage", "description": "x", "body": "y"},
    )
    assert "symbolic link" in created
    deleted = await chat.call("skill_manage", {"action": "delete", "name": "storage"})
    assert "no skill named 'storage'" in deleted
    assert (home / "storage" / "sessions.db").is_file()
    assert not (home / "storage" / "SKILL.md").exists()
    assert sorted(p.name for p in (home / "storage").iterdir()) == storage_before
    # the history is still there: the next request carries the first message
    await chat.say("still here?")
    sent = json.dumps(chat.llm.requests[-1]["messages"])
    assert "remember this chat" in sent


def _rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


async def _health_secs(gw: GatewayProcess) -> float:
    started = time.monotonic()
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{gw.port}/health", timeout=aiohttp.ClientTimeout(5)) as r,
    ):
        assert r.status == 200
    return time.monotonic() - started


def _plant_hostile_files(home: Path) -> list[Path]:
    """One bad SKILL.md per source folder, beside a good skill."""
    ws = home / "workspace"
    good = ws / ".agents" / "skills" / "good" / "SKILL.md"
    good.parent.mkdir(parents=True)
    good.write_text("---\ndescription: a skill that works\n---\nDo it.\n")
    fifo = ws / ".agents" / "skills" / "fifo" / "SKILL.md"
    zero = ws / ".picobot" / "skills" / "zero" / "SKILL.md"
    huge = home / "skills" / "huge" / "SKILL.md"
    bomb = ws / ".openclaw" / "skills" / "bomb" / "SKILL.md"
    for path in (fifo, zero, huge, bomb):
        path.parent.mkdir(parents=True)
    os.mkfifo(fifo)
    zero.symlink_to("/dev/zero")
    with huge.open("wb") as f:
        f.truncate(300_000_000)
    bomb.write_text(BOMB)
    return [fifo, zero, huge, bomb]


def _invalid_paths(gw: GatewayProcess) -> set[str]:
    return {str(e.get("path")) for e in gw.events("skill_invalid")}


async def test_hostile_skill_files_cost_only_themselves(
    home: Path, llm: FakeOpenAI, env: dict[str, str]
) -> None:
    config = _config(llm, "off", home)
    gw = await spawn_gateway(config, home, env)
    try:
        first = await _connect(gw, llm, "first")
        assert await first.say("warm up") == "echo: warm up"
        before = _rss_bytes(gw.proc.pid)
        bad = _plant_hostile_files(home)
        other = await _connect(gw, llm, "other")
        started = time.monotonic()
        assert await other.say("are you there?", timeout=10) == "echo: are you there?"
        assert time.monotonic() - started < 5
        assert await _health_secs(gw) < 2
        assert await first.say("and again", timeout=10) == "echo: and again"
        assert _invalid_paths(gw) >= {str(p) for p in bad}
        index = json.dumps(llm.requests[-1]["messages"])
        assert "- good: a skill that works" in index
        assert _rss_bytes(gw.proc.pid) - before < 50 * 1024 * 1024
        await first.ws.close()
        await other.ws.close()
    finally:
        await gw.stop()
    # a restart with the files in place starts, answers and says which are bad
    gw = await spawn_gateway(config, home, env)
    try:
        assert await _health_secs(gw) < 2
        chat = await _connect(gw, llm, "after-restart")
        assert await chat.say("hello again", timeout=10) == "echo: hello again"
        assert _invalid_paths(gw) >= {str(p) for p in bad}
        await chat.ws.close()
    finally:
        await gw.stop()
