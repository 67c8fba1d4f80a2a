"""The real `picobot` processes: the quick start without a key, and `picobot agent -m`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp

from tests.fakes.openai_server import FakeOpenAI
from tests.support import PICOBOT, child_env, conversation, spawn_gateway

ROOT = Path(__file__).resolve().parents[2]


async def _agent(url: str, env: dict[str, str], *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        PICOBOT,
        "agent",
        "--gateway-url",
        url,
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_quick_start_without_api_key_answers_clearly(home: Path) -> None:
    """`make run` on a fresh machine: the example config, no OPENAI_API_KEY."""
    config = json.loads((ROOT / "config.example.json").read_text())
    config["gateway"]["port"] = 0
    env = child_env(home)
    gw = await spawn_gateway(config, home, env)
    try:
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"http://127.0.0.1:{gw.port}/health") as r,
        ):
            assert r.status == 200
            assert (await r.json())["status"] == "ok"
        code, out, err = await _agent(gw.ws_url, env, "-m", "hello")
        assert code == 1, err  # the turn failed: a script can tell (issue 59)
        assert out == ""
        assert "OPENAI_API_KEY" in err
        assert "Traceback" not in out + err
    finally:
        assert await gw.stop() == 0
    assert gw.events("config_env_missing")[0]["variable"] == "OPENAI_API_KEY"
    assert not [line for line in gw.lines if "Traceback" in json.dumps(line)]


async def test_agent_one_shot_prints_reply_and_keeps_chat(home: Path, llm: FakeOpenAI) -> None:
    config = {
        "providers": {"default": {"base_url": llm.base_url, "api_key": "test-key"}},
        "models": {"default": {"model_id": "fake-model"}},
        "gateway": {"port": 0},
    }
    env = child_env(home)
    gw = await spawn_gateway(config, home, env)
    try:
        llm.add_text("Hello from the fake model.")
        code, out, err = await _agent(gw.ws_url, env, "-m", "hi there")
        assert (code, out) == (0, "Hello from the fake model.\n"), err
        # a second run continues the same conversation (stable chat id)
        code, out, _ = await _agent(gw.ws_url, env, "-m", "again")
        assert code == 0
        assert out == "echo: again\n"
        assert [m["content"] for m in conversation(llm.requests[-1])] == [
            "hi there",
            "Hello from the fake model.",
            "again",
        ]
        # an unreachable gateway is a clear non-zero exit
        code, _, err = await _agent("ws://127.0.0.1:9/ws", env, "-m", "x")
        assert code == 3
        assert "cannot connect" in err
    finally:
        assert await gw.stop() == 0
