"""`picobot agent` as a real process against `picobot gateway` as a real
process (issue 59): it finds the gateway from the gateway's own config (a
port that is not the default, the token), takes a base URL, leaves its
default chat alone for a one-off `--chat`, and exits non-zero when the
provider fails."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

import pytest

from gateway.cli.client.oneshot import ExitCode
from tests.fakes.openai_server import FakeOpenAI
from tests.support import PICOBOT, child_env, conversation, process_config, spawn_gateway

pytestmark = pytest.mark.slow


async def agent(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        PICOBOT,
        "agent",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    except BaseException:
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def free_port() -> int:
    """A port nothing listens on now (the gateway binds it a moment later)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_the_client_finds_the_gateway_from_its_config(home: Path, llm: FakeOpenAI) -> None:
    """No --gateway-url: gateway.port (not 19876), gateway.auth_token and
    channels.websocket.path come from $PICOBOT_HOME/config.json, the file the
    gateway runs with (0.0.0.0 → 127.0.0.1: tests/gateway/cli/test_client_target.py)."""
    port = free_port()
    config = process_config(
        llm.base_url,
        gateway={"host": "127.0.0.1", "port": port, "auth_token": "config-token"},
        channels={"websocket": {"path": "/chat/ws"}},
    )
    env = child_env(home)
    gw = await spawn_gateway(config, home, env)  # writes home/config.json
    try:
        assert gw.port == port
        llm.add_text("Found you.")
        code, out, err = await agent(env, "-m", "hello")
        assert (code, out) == (0, "Found you.\n"), err
        assert err == ""  # quiet: nothing but the answer
        # the config's token is not sent to a URL typed on the command line
        url = f"http://127.0.0.1:{port}/chat/ws"
        code, _, err = await agent(env, "--gateway-url", url, "-m", "x")
        assert code == ExitCode.UNREACHABLE
        assert "token" in err
        assert "config-token" not in err
        # --config names the file explicitly; PICOBOT_TOKEN beats the config's
        moved = home / "elsewhere"
        moved.mkdir()
        explicit = child_env(moved, PICOBOT_TOKEN="not-it")
        code, _, err = await agent(explicit, "--config", str(home / "config.json"), "-m", "x")
        assert code == ExitCode.UNREACHABLE, err
        code, out, err = await agent(
            child_env(moved), "--config", str(home / "config.json"), "-m", "again"
        )
        assert (code, out) == (0, "echo: again\n"), err
    finally:
        assert await gw.stop() == 0


async def test_a_base_url_gets_the_websocket_path(home: Path, llm: FakeOpenAI) -> None:
    env = child_env(home)
    gw = await spawn_gateway(process_config(llm.base_url), home, env)
    try:
        for url in (f"http://127.0.0.1:{gw.port}", f"ws://127.0.0.1:{gw.port}/"):
            code, out, err = await agent(env, "--gateway-url", url, "-m", "base")
            assert (code, out) == (0, "echo: base\n"), err
        # the config says port 0 (any free port): the client cannot know it
        code, _, err = await agent(env, "-m", "which port?")
        assert code == ExitCode.USAGE
        assert "gateway.port is 0" in err
    finally:
        assert await gw.stop() == 0


async def test_a_chat_for_one_run_leaves_the_default_chat_alone(
    home: Path, llm: FakeOpenAI
) -> None:
    env = child_env(home)
    gw = await spawn_gateway(process_config(llm.base_url), home, env)
    url = ["--gateway-url", gw.ws_url]
    state = home / "client.json"
    try:
        assert (await agent(env, *url, "-m", "first in the usual chat"))[0] == 0
        usual = json.loads(state.read_text())["chat_id"]
        code, out, err = await agent(env, *url, "--chat", "cli-side-chat", "-m", "a side question")
        assert (code, out) == (0, "echo: a side question\n"), err
        assert conversation(llm.requests[-1])[0]["content"] == "a side question"
        assert json.loads(state.read_text())["chat_id"] == usual
        assert (await agent(env, *url, "-m", "back again"))[0] == 0
        assert [m["content"] for m in conversation(llm.requests[-1])] == [
            "first in the usual chat",
            "echo: first in the usual chat",
            "back again",
        ]
        # --remember makes the other chat the default
        code, _, err = await agent(env, *url, "--chat", "cli-side-chat", "--remember", "-m", "x")
        assert code == 0, err
        assert json.loads(state.read_text())["chat_id"] == "cli-side-chat"
        code, _, err = await agent(env, *url, "--remember", "-m", "x")
        assert code == ExitCode.USAGE
        assert "--remember goes with --chat" in err
    finally:
        assert await gw.stop() == 0


async def test_a_failing_provider_is_a_non_zero_exit(home: Path, llm: FakeOpenAI) -> None:
    env = child_env(home)
    gw = await spawn_gateway(process_config(llm.base_url), home, env)
    try:
        llm.add_error(500)
        code, out, err = await agent(env, "--gateway-url", gw.ws_url, "-m", "hi")
        assert code == ExitCode.FAILED
        assert out == ""
        assert err.strip()  # the gateway's failure text, on stderr
        assert "Traceback" not in err
    finally:
        assert await gw.stop() == 0
    code, _, err = await agent(env, "--gateway-url", gw.ws_url, "-m", "anyone?")
    assert code == ExitCode.UNREACHABLE
    assert "cannot connect" in err
