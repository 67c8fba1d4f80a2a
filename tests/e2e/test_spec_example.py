"""The spec's minimal example config (reference README §12), tried as a new user
would: placeholders set, `picobot doctor`, then `picobot gateway`.

The copy in tests/fixtures is verbatim. Its one deliberate difference from
picobot (docs/CONFIG.md, "Differences from the spec's keys"): `host: 0.0.0.0`
needs `gateway.auth_token`. The port is set to 0 here only because tests never
take a fixed port.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp

from tests.fakes.openai_server import FakeOpenAI
from tests.support import PICOBOT, child_env, spawn_gateway

EXAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "spec_example_config.json"
TOKEN = "spec-example-token-0123456789"
REFUSAL = "gateway.auth_token: required when gateway.host is not a loopback address"


def spec_example() -> dict[str, Any]:
    config: dict[str, Any] = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    return config


def placeholders(llm: FakeOpenAI, home: Path) -> dict[str, str]:
    return child_env(
        home,
        OPENAI_BASE_URL=llm.base_url,
        OPENAI_API_KEY="sk-spec-example-key-0123456789",
        OPENAI_MODEL_NAME="spec-model",
        PICOBOT_TOKEN=TOKEN,
    )


async def run(env: dict[str, str], *args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        PICOBOT,
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode()


def test_the_copy_is_the_spec_example() -> None:
    example = spec_example()
    assert example["gateway"] == {
        "host": "0.0.0.0",
        "port": 19876,
        "show_tool_results": False,
        "agent_prompt_reinject_every": 100,
    }
    assert example["providers"]["default"]["memory_maintenance_timeout_secs"] == 600
    assert example["scheduler"]["enabled"] is True


async def test_as_written_it_is_refused_only_for_its_open_host(
    tmp_path: Path, home: Path, llm: FakeOpenAI
) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(spec_example()))
    path.chmod(0o600)
    env = placeholders(llm, home)
    code, out = await run(env, "doctor", "--config", str(path))
    assert code == 1
    assert REFUSAL in out
    assert "unknown key" not in out  # every key of the example is known
    code, out = await run(env, "gateway", "--config", str(path))
    assert code == 2
    assert REFUSAL in out
    assert "unknown key" not in out
    assert "Traceback" not in out


async def test_with_a_token_it_passes_doctor_and_the_gateway_answers(
    tmp_path: Path, home: Path, llm: FakeOpenAI
) -> None:
    config = spec_example()
    config["gateway"]["auth_token"] = "${PICOBOT_TOKEN}"  # the documented difference
    config["gateway"]["port"] = 0
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    path.chmod(0o600)
    env = placeholders(llm, home)

    code, out = await run(env, "doctor", "--config", str(path), "--probe")
    assert code == 0, out
    assert TOKEN not in out

    gw = await spawn_gateway(config, home, env)
    try:
        started = gw.events("gateway_started")[0]
        assert started["host"] == "0.0.0.0"
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"http://127.0.0.1:{gw.port}/ready") as ready,
        ):
            assert ready.status == 200, await ready.text()
        llm.add_text("Hello from the spec's example.")
        code, out = await run(env, "agent", "--gateway-url", gw.ws_url, "-m", "hi")
        assert (code, out) == (0, "Hello from the spec's example.\n")
    finally:
        assert await gw.stop() == 0
    [request] = llm.requests
    assert request["model"] == "spec-model"
    assert request["temperature"] == 0.2
