"""Tool names in `tools.disabled` and `tools.approval.tools` are checked when the
config loads, so `picobot doctor` and start-up refuse a typo with one line."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest

from agent.subagents.types import TASK_TOOL
from agent.tools.base import ToolSettings
from agent.tools.builtin import BUILTIN_TOOL_NAMES, builtin_tools
from gateway.cli.doctor.main import run_doctor
from gateway.config.core import ConfigError
from gateway.config.loading import load_config
from gateway.config.tool_names import KNOWN_TOOL_NAMES
from gateway.ops.metrics import Metrics
from gateway.tools.setup import build_tools
from gateway.tools.skills import build_skill_runtime, skill_tool_kit
from tests.support import make_config


def test_the_known_names_are_the_tools_the_gateway_registers(tmp_path: Path) -> None:
    loaded = make_config(tmp_path, "http://127.0.0.1:9/v1", scheduler={"enabled": True})
    kit = skill_tool_kit(build_skill_runtime(loaded, None))
    _, registry, _ = build_tools(loaded, kit, Metrics())
    offered = {*registry.names(), TASK_TOOL}  # `task` is registered once sub-agents are known
    # `shell` is `bash`'s other name; `skill_list` the spec's name of skill_manage's listing
    assert offered == KNOWN_TOOL_NAMES - {"shell", "skill_list"}


def test_the_built_in_names_are_the_built_in_tools(tmp_path: Path) -> None:
    tools = builtin_tools(ToolSettings(workspace=tmp_path), "UTC")
    assert {t.name for t in tools} == BUILTIN_TOOL_NAMES


@pytest.mark.parametrize(
    ("tools", "expected"),
    [
        ({"disabled": ["web_fetc"]}, "tools.disabled: no tool named 'web_fetc' (did you mean 'web_fetch'?)"),
        ({"approval": {"tools": {"bahs": "always"}}}, "tools.approval.tools: no tool named 'bahs' (did you mean 'bash'?)"),
        ({"disabled": ["zzzz"]}, "tools.disabled: no tool named 'zzzz' (the tools: bash, calculator,"),
    ],
)  # fmt: skip
def test_a_misspelt_tool_name_is_one_line(
    tmp_path: Path, tools: dict[str, object], expected: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        make_config(tmp_path, "http://127.0.0.1:9/v1", tools=tools)
    assert str(caught.value).startswith(f"test config is invalid: {expected}")
    assert "\n" not in str(caught.value)


def test_mcp_tool_names_and_the_shell_alias_pass(tmp_path: Path) -> None:
    loaded = make_config(
        tmp_path,
        "http://127.0.0.1:9/v1",
        tools={
            "disabled": ["mcp_fs_write", "skill_list"],
            "approval": {"tools": {"shell": "always"}},
        },
    )
    assert loaded.config.tools.disabled == ["mcp_fs_write", "skill_list"]


async def test_a_job_for_a_disabled_channel_is_refused_by_doctor_and_start_up(
    tmp_path: Path,
) -> None:
    job = {
        "id": "morning",
        "kind": "outbound_message",
        "schedule": {"type": "interval", "seconds": 60},
        "target": {"channel": "telegram", "chat_id": "42"},
        "payload": {"text": "good morning"},
    }
    path = tmp_path / "config.json"
    env = {"PICOBOT_HOME": str(tmp_path / "home")}
    expected = (
        f"{path} is invalid: scheduler.jobs[0] (morning): target.channel: 'telegram' is not an "
        "enabled channel (enable it, or set the job's enabled to false)"
    )
    path.write_text(json.dumps({"scheduler": {"enabled": True, "jobs": [job]}}))
    loaded = load_config(path, env)  # a fact of the channels that run, checked at start
    with pytest.raises(ConfigError) as caught:
        loaded.check_job_targets(["websocket"])
    assert str(caught.value) == expected
    loaded.check_job_targets(["websocket", "telegram"])
    out = StringIO()
    assert await run_doctor(str(path), env, probe=False, out=out) == 1
    assert f"problem config: {expected}\n" in out.getvalue()
    # the same job with the scheduler off, or the job off, is no problem
    for scheduler in ({"enabled": False, "jobs": [job]}, {"jobs": [{**job, "enabled": False}]}):
        path.write_text(json.dumps({"scheduler": scheduler}))
        load_config(path, env).check_job_targets(["websocket"])


async def test_doctor_prints_what_start_up_prints(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"tools": {"disabled": ["exce"]}}), encoding="utf-8")
    env = {"PICOBOT_HOME": str(tmp_path / "home")}
    with pytest.raises(ConfigError) as caught:
        load_config(str(path), env)
    out = StringIO()
    assert await run_doctor(str(path), env, probe=False, out=out) == 1
    assert f"problem config: {caught.value}\n" in out.getvalue()
