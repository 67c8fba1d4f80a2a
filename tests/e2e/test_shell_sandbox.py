"""The bash tool in a real sandbox, through a real gateway process (issue 15).

The fake LLM scripts `bash` calls; what each command printed comes back to
the LLM as the tool result, which is where we look for leaked secrets. All
files live under pytest's tmp dirs; the commands touch only the workspace.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import websockets

from tests.fakes.openai_server import FakeOpenAI
from tests.support import GatewayProcess, child_env, processes_with, spawn_gateway, wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed"),
]

SECRETS = {
    "OPENAI_API_KEY": "sk-env-openai-5fa1c0de",
    "TELEGRAM_BOT_TOKEN": "123:env-telegram-77aa",
    "FEISHU_APP_SECRET": "env-feishu-secret-9b9b",
    "ANTHROPIC_API_KEY": "sk-ant-env-4c4c4c",
}
CONFIG_SECRET = "config-file-token-e1e1e1"  # gateway.auth_token, only in config.json
DB_SECRET = "stored-in-the-database-d2d2"  # a user message, only in the database
ALL_SECRETS = [*SECRETS.values(), CONFIG_SECRET, DB_SECRET]


def _config(llm: FakeOpenAI, sandbox: str, home: Path) -> dict[str, Any]:
    return {
        "providers": {
            "default": {"base_url": llm.base_url, "api_key": "${OPENAI_API_KEY}", "max_retries": 0}
        },
        "models": {"default": {"model_id": "fake-model"}},
        "gateway": {"port": 0, "shutdown_timeout_secs": 5, "auth_token": CONFIG_SECRET},
        "tools": {"workspace": str(home / "workspace"), "bash": {"sandbox": sandbox}},
        "logging": {"format": "json"},
    }


class Chat:
    def __init__(self, ws: websockets.ClientConnection, llm: FakeOpenAI) -> None:
        self.ws = ws
        self.llm = llm
        self._n = 0

    async def say(self, text: str) -> None:
        self._n += 1
        msg_id = f"m{self._n}"
        await self.ws.send(json.dumps({"type": "message", "id": msg_id, "text": text}))
        async with asyncio.timeout(60):
            while True:
                frame = json.loads(await self.ws.recv())
                if frame["type"] == "message" and frame.get("reply_to") == msg_id:
                    return

    async def bash(self, command: str, **args: Any) -> str:
        """Run `command` through the model's bash tool; the tool result."""
        self.llm.add_tool_call("bash", {"command": command, **args})
        self.llm.add_text("done")
        await self.say(f"please run {command[:20]}")
        tool_results = [
            m["content"] for m in self.llm.requests[-1]["messages"] if m["role"] == "tool"
        ]
        return str(tool_results[-1])


@pytest.fixture
async def started(
    home: Path, llm: FakeOpenAI, request: pytest.FixtureRequest
) -> AsyncIterator[tuple[GatewayProcess, Chat]]:
    sandbox: str = request.param
    wrapper: list[str] = []
    if sandbox == "off" and os.geteuid() == 0:
        # root with capabilities may read any process's environ: run the gateway
        # without them, as a gateway running as its own user would be
        wrapper = ["setpriv", "--bounding-set", "-all", "--inh-caps", "-all", "--"]
    gw = await spawn_gateway(
        _config(llm, sandbox, home), home, child_env(home, **SECRETS), wrapper=wrapper
    )
    ws = await websockets.connect(gw.ws_url)
    await ws.send(json.dumps({"type": "hello", "chat_id": "sandbox", "token": CONFIG_SECRET}))
    assert json.loads(await ws.recv())["type"] == "welcome"
    chat = Chat(ws, llm)
    await chat.say(f"remember {DB_SECRET}")
    try:
        yield gw, chat
    finally:
        await ws.close()
        if gw.proc.returncode is None:
            await gw.stop()


@pytest.mark.parametrize("started", ["bwrap"], indirect=True)
async def test_sandboxed_bash_sees_no_secrets(
    home: Path, started: tuple[GatewayProcess, Chat]
) -> None:
    gw, chat = started
    db = home / "storage" / "sessions.db"
    outputs = [
        await chat.bash("tr '\\0' '\\n' </proc/$PPID/environ; echo; env"),
        await chat.bash(f"cat /proc/{gw.proc.pid}/environ; ls /proc | head -50"),
        await chat.bash(f"cat {home}/config.json ~/.picobot/config.json; ls -la {home}"),
        await chat.bash(f"cat {db} {db}-wal | tr -c '[:print:]' ' '"),
        await chat.bash("cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'"),
    ]
    for out in outputs:
        for secret in ALL_SECRETS:
            assert secret not in out
    # the checks ran for real: the environ was there to read, the files were not
    assert outputs[0].startswith("exit_code: 0")
    assert "No such file or directory" in outputs[2]
    # the workspace is writable and visible
    assert (await chat.bash("echo hi > note.txt && cat note.txt")).endswith("hi\n")
    assert (home / "workspace" / "note.txt").read_text() == "hi\n"


@pytest.mark.parametrize("started", ["bwrap"], indirect=True)
async def test_background_jobs_die_with_the_command(
    home: Path, started: tuple[GatewayProcess, Chat]
) -> None:
    _, chat = started
    ws = home / "workspace"
    await chat.bash(f"setsid sh -c 'sleep 0.7351; touch {ws}/m1' >/dev/null 2>&1 &")
    await chat.bash(f"nohup sh -c 'sleep 0.7352; touch {ws}/m2' >/dev/null 2>&1 &")
    timed = await chat.bash(
        f"(sleep 2.7353; touch {ws}/m3) >/dev/null 2>&1 & sleep 30.7354", timeout_secs=1
    )
    assert timed.startswith("[timed out")
    # each command's processes are gone the moment its tool call returned
    for marker in ("0.7351", "0.7352", "2.7353", "30.7354"):
        assert processes_with(f"sleep\0{marker}") == []
    # nor anything that could still write a marker (each shell's, and bwrap's,
    # command line holds its `touch`): none can appear later
    assert processes_with(f"touch {ws}/m") == []
    assert sorted(p.name for p in ws.iterdir() if p.name.startswith("m")) == []


@pytest.mark.parametrize("started", ["bwrap"], indirect=True)
async def test_sigkill_of_the_gateway_kills_the_running_command(
    home: Path, llm: FakeOpenAI, started: tuple[GatewayProcess, Chat]
) -> None:
    gw, chat = started
    ws = home / "workspace"
    llm.add_tool_call("bash", {"command": f"sleep 20.7355; touch {ws}/after-kill"})
    await chat.ws.send(json.dumps({"type": "message", "id": "k", "text": "long one"}))
    await wait_until(lambda: processes_with("sleep\x0020.7355") != [])
    gw.proc.send_signal(signal.SIGKILL)
    await gw.stop(sig=None)
    await wait_until(lambda: processes_with("sleep\x0020.7355") == [])
    assert not (ws / "after-kill").exists()


@pytest.mark.parametrize("started", ["off"], indirect=True)
async def test_without_sandbox_the_gateway_environ_is_refused(
    started: tuple[GatewayProcess, Chat],
) -> None:
    gw, chat = started
    out = await chat.bash(f"cat /proc/{gw.proc.pid}/environ; tr '\\0' '\\n' </proc/$PPID/environ")
    for secret in SECRETS.values():
        assert secret not in out
    assert "Permission denied" in out
