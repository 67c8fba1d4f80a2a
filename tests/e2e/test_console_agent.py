"""The console's agent view over HTTP (gateway/console/schedule.py, tools.py):
scheduled jobs paused, resumed, run and deleted as `picobot jobs` does it;
skills disabled and enabled as `skill_manage` does it, seen by the next turn
and after a restart; MCP servers as the running manager holds them, a real
server (the `mcp` SDK's FastMCP) that stops shown down within its ping
interval."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from gateway.app import Gateway
from gateway.cli import main
from skills.index import HEADER
from storage.sql.jobs import RunCause, RunStatus
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.recording_channel import RecordingChannel
from tests.mcp_servers.harness import HttpMcpServer, stdio_server
from tests.skills.helpers import write_skill
from tests.support import make_config, newest, running_gateway, wait_until, ws_client

TOKEN = "console-agent-mcp-token-93b1f0"
CONFIG_JOB = {
    "id": "cfg.hello",
    "kind": "outbound_message",
    "schedule": {"type": "interval", "seconds": 3600},
    "target": {"channel": "rec", "chat_id": "team"},
    "payload": {"text": "hello from the config"},
}
RUNTIME_JOB = {
    "id": "alice/water",  # a "/" in the id: the route takes it whole
    "kind": "outbound_message",
    "schedule": {"type": "interval", "seconds": 3600},
    "target": {"channel": "rec", "chat_id": "team"},
    "payload": {"text": "drink water"},
}


async def _call(
    http: aiohttp.ClientSession, gw: Gateway, method: str, path: str
) -> tuple[int, dict[str, Any]]:
    async with http.request(method, f"{gw.base_url}/api/ops{path}") as response:
        return response.status, await response.json()


async def _jobs_in_db(gw: Gateway) -> dict[str, tuple[bool, Any]]:
    assert gw.store is not None
    return {job.id: (job.paused, last) for job, last in await gw.store.scheduled_jobs()}


async def test_job_actions_change_the_database_and_run_now_runs(
    home: Path, llm: FakeOpenAI
) -> None:
    channel = RecordingChannel()
    scheduler = {"tick_resolution_ms": 10, "jobs": [CONFIG_JOB]}
    loaded = make_config(home, llm.base_url, scheduler=scheduler)
    async with (
        running_gateway(loaded, extra_channels=[channel]) as gw,
        aiohttp.ClientSession() as http,
    ):
        assert gw.scheduler is not None
        assert gw.store is not None
        made = await gw.scheduler.manage(  # as the scheduler_manage tool makes one
            "put", {"job": RUNTIME_JOB}, channel="websocket", sender_id="alice", admin=False
        )
        assert made["ok"], made
        status, listed = await _call(http, gw, "GET", "/jobs")
        assert status == 200
        assert listed["scheduler"] == "running"
        shown = {j["id"]: j for j in listed["jobs"]}
        in_db = {job.id: job for job, _ in await gw.store.scheduled_jobs()}
        assert set(shown) == set(in_db) >= {"cfg.hello", "alice/water"}
        assert shown["alice/water"]["owner"] == "websocket:alice"
        assert (shown["cfg.hello"]["source"], shown["alice/water"]["source"]) == (
            "config",
            "runtime",
        )
        assert {j["state"] for j in shown.values()} == {"scheduled"}

        status, body = await _call(http, gw, "POST", "/jobs/alice/water/pause")
        assert (status, body["job"]["state"]) == (200, "paused")
        assert (await _jobs_in_db(gw))["alice/water"][0] is True
        status, body = await _call(http, gw, "POST", "/jobs/alice/water/resume")
        assert (status, body["job"]["state"]) == (200, "scheduled")
        assert (await _jobs_in_db(gw))["alice/water"][0] is False

        assert (await _jobs_in_db(gw))["cfg.hello"][1] is None  # never run: due in an hour
        status, _ = await _call(http, gw, "POST", "/jobs/cfg.hello/run")
        assert status == 200
        sent = await channel.wait_sent(1)
        assert [s.message.text for s in sent] == ["hello from the config"]

        async def finished() -> bool:
            last = (await _jobs_in_db(gw))["cfg.hello"][1]
            return last is not None and last.status is RunStatus.SUCCEEDED

        await wait_until(finished)
        last = (await _jobs_in_db(gw))["cfg.hello"][1]
        assert last.cause is RunCause.MANUAL
        _, listed = await _call(http, gw, "GET", "/jobs")
        again = {j["id"]: j for j in listed["jobs"]}["cfg.hello"]
        assert (again["last_run"]["status"], again["last_run"]["cause"]) == ("succeeded", "manual")

        status, body = await _call(http, gw, "DELETE", "/jobs/cfg.hello")
        assert status == 409
        assert "config file" in body["error"]
        assert "cfg.hello" in await _jobs_in_db(gw)
        status, body = await _call(http, gw, "DELETE", "/jobs/alice/water")
        assert (status, body) == (200, {"deleted": "alice/water"})
        assert "alice/water" not in await _jobs_in_db(gw)
        status, body = await _call(http, gw, "POST", "/jobs/no-such-job/pause")
        assert status == 404
        assert "no job" in body["error"]

    loaded = make_config(home, llm.base_url, scheduler={"enabled": False})
    async with running_gateway(loaded) as gw, aiohttp.ClientSession() as http:
        status, listed = await _call(http, gw, "GET", "/jobs")
        assert listed["scheduler"] == "off"
        assert {j["id"] for j in listed["jobs"]} == set(await _jobs_in_db(gw))
        status, body = await _call(http, gw, "POST", "/jobs/cfg.hello/pause")
        assert status == 409
        assert "scheduler is off" in body["error"]


def _index(request: dict[str, Any]) -> list[str]:
    """The skill names the model was offered in this request's index."""
    for message in request["messages"]:
        content = message.get("content")
        if isinstance(content, str) and content.startswith(HEADER):
            return [ln[2:].split(":")[0] for ln in content.splitlines() if ln.startswith("- ")]
    return []


@pytest.fixture
def user_home(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    user_home = tmp_path / "user-home"
    user_home.mkdir()
    monkeypatch.setenv("HOME", str(user_home))  # no real ~/.agents skills
    monkeypatch.setenv("PICOBOT_HOME", str(home))  # for the CLI
    return user_home


async def test_a_disabled_skill_is_not_offered_until_enabled_and_stays_off_over_a_restart(
    home: Path, llm: FakeOpenAI, user_home: Path
) -> None:
    write_skill(home / "skills", "demo", "Demo things.", "Demo body.")
    write_skill(home / "skills", "broken", None)  # no description: skipped
    loaded = make_config(home, llm.base_url, skills={"check_interval_secs": 0})
    state_file = home / "skill-state.json"
    async with (
        running_gateway(loaded) as gw,
        aiohttp.ClientSession() as http,
        ws_client(gw) as client,
    ):
        assert gw.skills is not None
        scan = await gw.skills.current()
        status, body = await _call(http, gw, "GET", "/skills")
        assert status == 200
        assert body["enabled"] is True
        assert [s["name"] for s in body["loaded"]] == list(scan.skills)
        assert {"demo", "reminders", "skill-creator"} <= set(scan.skills)
        demo = next(s for s in body["loaded"] if s["name"] == "demo")
        assert (demo["source"], demo["description"]) == ("user", "Demo things.")
        assert body["disabled"] == []
        [skipped] = body["skipped"]
        assert skipped["path"] == str(home / "skills" / "broken" / "SKILL.md")
        assert skipped["reason"] == scan.invalid[0].reason
        assert "description" in skipped["reason"]

        await client.ask("first")
        assert "demo" in _index(llm.requests[-1])

        status, body = await _call(http, gw, "POST", "/skills/demo/disable")
        assert (status, body["disabled"]) == (200, "demo")
        assert json.loads(state_file.read_text())["disabled_skills"] == ["demo"]
        _, body = await _call(http, gw, "GET", "/skills")
        assert "demo" not in [s["name"] for s in body["loaded"]]
        assert [(s["name"], s["source"]) for s in body["disabled"]] == [("demo", "user")]
        assert body["events"][0]["event"] == "disabled"
        assert (body["events"][0]["skill"], body["events"][0]["detail"]) == (
            "demo",
            "console (operator)",
        )
        llm.add_tool_call("skill_activate", {"name": "demo"})
        llm.add_text("done")
        assert await client.ask("use demo") == "done"
        assert "demo" not in _index(llm.requests[-2])
        result = newest(llm.requests[-1])
        assert result["role"] == "tool"
        assert "no skill named 'demo'" in result["content"]

        assert (await _call(http, gw, "POST", "/skills/demo/disable"))[0] == 409
        assert (await _call(http, gw, "POST", "/skills/ghost/disable"))[0] == 404
        assert (await _call(http, gw, "POST", "/skills/reminders/enable"))[0] == 409

    async with (
        running_gateway(loaded) as gw,
        aiohttp.ClientSession() as http,
        ws_client(gw) as client,
    ):
        _, body = await _call(http, gw, "GET", "/skills")
        assert [s["name"] for s in body["disabled"]] == ["demo"]  # kept over the restart
        await client.ask("after the restart")
        assert "demo" not in _index(llm.requests[-1])

        status, body = await _call(http, gw, "POST", "/skills/demo/enable")
        assert (status, body["enabled"]) == (200, "demo")
        assert json.loads(state_file.read_text())["disabled_skills"] == []
        _, body = await _call(http, gw, "GET", "/skills")
        assert "demo" in [s["name"] for s in body["loaded"]]
        assert body["disabled"] == []
        await client.ask("enabled again")
        assert "demo" in _index(llm.requests[-1])

    # the CLI turns it off through the same runtime call
    config_path = home / "config.json"
    config_path.write_text(json.dumps({"skills": {"project_dir": str(home / "workspace")}}))
    argv = ["skills", "disable", "demo", "--config", str(config_path)]
    assert await asyncio.to_thread(main, argv) == 0
    assert json.loads(state_file.read_text())["disabled_skills"] == ["demo"]


async def test_mcp_servers_show_their_tools_and_a_stopped_one_shows_down(
    home: Path, llm: FakeOpenAI
) -> None:
    async with HttpMcpServer(TOKEN) as http_server:
        servers = {
            "web": http_server.entry(
                headers={"Authorization": f"Bearer {TOKEN}"}, ping_interval_secs=1
            ),
            "idle": {**stdio_server(), "isActive": False},
        }
        loaded = make_config(
            home, llm.base_url, mcpServers=servers, tools={"disabled": ["mcp_web_crash"]}
        )
        async with running_gateway(loaded) as gw, aiohttp.ClientSession() as http:
            assert gw.mcp is not None
            web = gw.mcp.servers["web"]
            await gw.mcp.wait_until(lambda: str(web.state) == "up")
            status, body = await _call(http, gw, "GET", "/mcp")
            assert status == 200
            shown = {s["key"]: s for s in body["servers"]}
            assert list(shown) == ["web", "idle"]
            assert (shown["web"]["state"], shown["web"]["error"]) == ("up", None)
            assert shown["web"]["transport"] == "http"
            tools = {t["name"]: t for t in shown["web"]["tools"]}
            names = {f"mcp_web_{t.name}" for t in web.tools}
            assert names == {"mcp_web_echo", "mcp_web_crash"}
            assert set(tools) == names
            assert (tools["mcp_web_echo"]["offered"], tools["mcp_web_echo"]["tool"]) == (
                True,
                "echo",
            )
            assert (tools["mcp_web_crash"]["offered"], tools["mcp_web_crash"]["why"]) == (
                False,
                "disabled",
            )
            assert (shown["idle"]["state"], shown["idle"]["tools"]) == ("inactive", [])

            await http_server.kill()

            async def shown_down() -> bool:
                _, body = await _call(http, gw, "GET", "/mcp")
                web_now = body["servers"][0]
                return web_now["state"] != "up" and web_now["tools"] == []

            # the next ping (1 s) fails at once: well within a few intervals
            await wait_until(shown_down, timeout=10)
            await gw.mcp.wait_until(lambda: web.status().error is not None)
            async with http.get(f"{gw.base_url}/api/ops/mcp") as response:
                text = await response.text()
            body = json.loads(text)
            assert body["servers"][0]["state"] in ("down", "connecting")
            assert body["servers"][0]["error"]
            assert TOKEN not in text
