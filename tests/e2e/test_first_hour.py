"""A newcomer's first hour, through real `picobot` processes: doctor on the
config `make run` writes, a typo refused in one line by doctor and start-up
alike, and a start log that says where everything is."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

import aiohttp

from tests.support import child_env, run_picobot, spawn_gateway

ROOT = Path(__file__).resolve().parents[2]


async def test_doctor_passes_the_config_make_run_writes(home: Path, tmp_path: Path) -> None:
    clone = tmp_path / "clone"  # where `make run` wrote ./config.json; $PICOBOT_HOME has none
    clone.mkdir()
    config = clone / "config.json"
    shutil.copy(ROOT / "config.example.json", config)
    config.chmod(0o600)  # as `make run` installs it

    code, out = await run_picobot(home, "doctor", cwd=clone)  # as the README runs it

    assert code == 0, out
    warnings = [line for line in out.splitlines() if line.startswith("warn")]
    assert len(warnings) == 1, out
    assert "${OPENAI_API_KEY} is not set" in warnings[0]
    assert f"ok      config: {config} is valid" in out
    assert out.endswith("no problems found, 1 warning(s)\n")


async def test_a_misspelt_tool_is_the_same_one_line_from_doctor_and_gateway(home: Path) -> None:
    config = home / "config.json"
    config.write_text(json.dumps({"tools": {"disabled": ["web_fetc"]}}))
    config.chmod(0o600)
    expected = (
        f"{config} is invalid: tools.disabled: no tool named 'web_fetc' (did you mean 'web_fetch'?)"
    )

    code, out = await run_picobot(home, "gateway", "--config", str(config))
    assert (code, out) == (2, f"picobot: {expected}\n")

    code, out = await run_picobot(home, "doctor", "--config", str(config))
    assert code == 1
    assert f"problem config: {expected}\n" in out
    assert "Traceback" not in out


async def test_the_start_log_names_the_home_the_config_and_the_web_ui(home: Path) -> None:
    config = json.loads((ROOT / "config.example.json").read_text())
    config["gateway"]["port"] = 0
    gw = await spawn_gateway(config, home, child_env(home))
    try:
        started = await gw.wait_event("gateway_started")
        assert started["home"] == str(home)
        assert started["config"] == str(home / "config.json")
        assert started["web_ui"] == f"http://127.0.0.1:{gw.port}/"
        async with aiohttp.ClientSession() as http, http.get(started["web_ui"]) as page:
            assert page.status == 200
            assert "text/html" in page.headers["Content-Type"]
    finally:
        assert await gw.stop() == 0


async def test_version_is_the_projects(home: Path) -> None:
    with (ROOT / "pyproject.toml").open("rb") as handle:
        version = tomllib.load(handle)["project"]["version"]
    assert await run_picobot(home, "--version") == (0, f"picobot {version}\n")
