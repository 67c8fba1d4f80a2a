"""The console's configuration view: GET /api/ops/config shows the loaded
config with every secret masked (planted in the operator token, channel
tokens, a provider's api key and extra header, an MCP server's env), and
GET /api/ops/doctor finds what `picobot doctor` prints for the same file —
with ?probe=1 what `picobot doctor --probe` prints; the checks run off the
event loop, one run at a time, a request waiting a bounded time."""

from __future__ import annotations

import asyncio
import io
import json
import re
import threading
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from pydantic import SecretStr

from gateway.cli.doctor.main import run_doctor
from gateway.config.loading import LoadedConfig, load_config
from gateway.console import settings
from gateway.console.api import ConsoleError
from gateway.ops.doctor import checks
from gateway.ops.doctor.findings import Finding, Status, ok
from tests.fakes.openai_server import FakeOpenAI
from tests.support import make_config, running_gateway, wait_until

OPERATOR = "operator-token-planted-91c2"
PROVIDER_KEY = "provider-key-planted-3e7d"
WS_TOKEN = "ws-token-planted-58ab"
TELEGRAM_TOKEN = "123456789:AAplantedTelegramTokenValue0123456789"
MCP_SECRET = "mcp-env-planted-b04f"  # under a name that does not look secret
HEADER_SECRET = "proxy-pass-planted-77e1"
SECRETS = (OPERATOR, PROVIDER_KEY, WS_TOKEN, TELEGRAM_TOKEN, MCP_SECRET, HEADER_SECRET)
SECRET_KEY = re.compile(r"key|token|secret|passw|authori[sz]ation|credential|cookie", re.I)


def _write_config(home: Path, llm: FakeOpenAI) -> tuple[Path, dict[str, str]]:
    path = home / "config.json"
    path.write_text(
        json.dumps(
            {
                "providers": {
                    "default": {
                        "base_url": llm.base_url,
                        "api_key": "${PROVIDER_KEY}",
                        "max_retries": 0,
                        "extra_headers": {"X-Proxy-Pass": HEADER_SECRET},
                    }
                },
                "models": {"default": {"model_id": "fake-model"}},
                "gateway": {"port": 0, "auth_token": OPERATOR, "shutdown_timeout_secs": 5},
                "channels": {
                    "websocket": {"tokens": {"alice": WS_TOKEN}},
                    "telegram": {"enabled": False, "token": TELEGRAM_TOKEN},
                },
                "mcpServers": {
                    "db": {
                        "type": "stdio",
                        "command": "db-mcp",
                        "isActive": False,
                        "env": {"DB_OPTS": MCP_SECRET, "MODE": "read-only"},
                    }
                },
            }
        )
    )
    path.chmod(0o644)  # doctor warns: every user can read it
    return path, {"PICOBOT_HOME": str(home), "PROVIDER_KEY": PROVIDER_KEY}


async def _get(http: aiohttp.ClientSession, url: str) -> tuple[str, dict[str, Any]]:
    async with http.get(url, headers={"Authorization": f"Bearer {OPERATOR}"}) as response:
        text = await response.text()
        assert response.status == 200, text
        return text, json.loads(text)


def _secret_leaves(node: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], str]]:
    """Every SecretStr of a dumped config: its path and its value."""
    if isinstance(node, SecretStr):
        return [(path, node.get_secret_value())]
    if isinstance(node, dict):
        return [leaf for k, v in node.items() for leaf in _secret_leaves(v, (*path, str(k)))]
    if isinstance(node, list | tuple):
        return [leaf for i, v in enumerate(node) for leaf in _secret_leaves(v, (*path, str(i)))]
    return []


def _at(node: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def _strings_under_secret_keys(node: Any, masked: bool = False) -> list[str]:
    if isinstance(node, dict):
        return [
            s
            for k, v in node.items()
            for s in _strings_under_secret_keys(v, masked or bool(SECRET_KEY.search(k)))
        ]
    if isinstance(node, list):
        return [s for v in node for s in _strings_under_secret_keys(v, masked)]
    return [node] if masked and isinstance(node, str) else []


async def test_the_config_shows_every_secret_masked(home: Path, llm: FakeOpenAI) -> None:
    path, env = _write_config(home, llm)
    loaded = load_config(path, env, home)
    async with running_gateway(loaded) as gw, aiohttp.ClientSession() as http:
        text, data = await _get(http, f"{gw.base_url}/api/ops/config")

    for secret in SECRETS:
        assert secret not in text
    config = data["config"]
    assert config["gateway"]["auth_token"] == "***"
    assert config["providers"]["default"]["api_key"] == "***"
    assert config["providers"]["default"]["extra_headers"] == {"X-Proxy-Pass": "***"}
    assert config["channels"]["websocket"]["tokens"] == {"alice": "***"}
    assert config["channels"]["telegram"]["token"] == "***"
    assert config["mcpServers"]["db"]["env"] == {"DB_OPTS": "***", "MODE": "***"}
    # what is no secret reads as loaded
    assert config["mcpServers"]["db"]["command"] == "db-mcp"
    assert config["models"]["default"]["model_id"] == "fake-model"
    assert config["providers"]["default"]["base_url"] == llm.base_url
    assert config["gateway"]["port"] == 0
    assert (data["path"], data["home"]) == (str(path), str(home))

    # every SecretStr of the loaded config: "***" when set, "" when not
    leaves = _secret_leaves(loaded.config.model_dump(mode="python", by_alias=True))
    assert len([v for _, v in leaves if v]) >= 3
    for where, value in leaves:
        assert _at(config, where) == ("***" if value else ""), where
    # every string under a key the redactor takes for a secret's
    assert set(_strings_under_secret_keys(config)) <= {"***", ""}


def _rendered(findings: list[dict[str, Any]]) -> str:
    return "".join(
        Finding(Status(f["status"]), f["check"], f["message"], f["fix"]).render() + "\n"
        for f in findings
    )


@pytest.mark.parametrize("probe", [False, True])
async def test_the_doctor_finds_what_the_cli_prints(
    home: Path, llm: FakeOpenAI, probe: bool
) -> None:
    path, env = _write_config(home, llm)
    async with running_gateway(load_config(path, env, home)) as gw, aiohttp.ClientSession() as http:
        url = f"{gw.base_url}/api/ops/doctor" + ("?probe=1" if probe else "")
        text, data = await _get(http, url)
        out = io.StringIO()
        await run_doctor(str(path), env, probe=probe, out=out, cwd=home, probe_timeout_secs=5)

    for secret in SECRETS:
        assert secret not in text
    printed = out.getvalue()
    *lines, summary = printed.splitlines()
    assert _rendered(data["findings"]) == "".join(line + "\n" for line in lines)
    assert data["probed"] is probe
    problems, warnings = data["problems"], data["warnings"]
    counted = f"{problems} problem(s) found" if problems else "no problems found"
    assert summary == (f"{counted}, {warnings} warning(s)" if warnings else counted)
    assert warnings >= 1  # the file's mode
    checks = {f["check"]: f for f in data["findings"]}
    assert "every user can read it" in str([f["message"] for f in data["findings"]])
    assert checks["storage"]["status"] == "ok"  # the running gateway's own database
    assert checks["provider default"]["message"].endswith("api_key present")
    if probe:
        assert checks["probe provider default"]["status"] == "ok"
    else:
        assert not any(f["check"].startswith("probe") for f in data["findings"])


async def test_slow_checks_run_once_and_a_request_waits_a_bounded_time(
    home: Path, llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A check that hangs (a huge integrity check): each request gets 504
    after the wait; a request meanwhile joins the same run; once it ends,
    the next request starts a new one."""
    release = threading.Event()
    calls: list[LoadedConfig] = []
    done: list[bool] = []

    def hanging(loaded: LoadedConfig) -> list[Finding]:
        calls.append(loaded)
        release.wait(10)
        done.append(True)
        return [ok("storage", "checked")]

    monkeypatch.setattr(checks, "offline_findings", hanging)  # the view imports it at its run
    monkeypatch.setattr(settings, "WAIT_SECS", 0.3)
    runs, loaded = settings.DoctorRuns(), make_config(home, llm.base_url)

    results = await asyncio.gather(
        runs.findings(loaded, probe=False),
        runs.findings(loaded, probe=False),
        return_exceptions=True,
    )
    assert all(isinstance(r, ConsoleError) and r.status == 504 for r in results), results
    with pytest.raises(ConsoleError):
        await runs.findings(loaded, probe=False)
    assert len(calls) == 1  # one run, joined

    release.set()
    await wait_until(lambda: done)
    assert await runs.findings(loaded, probe=False) == [ok("storage", "checked")]
    assert await runs.findings(loaded, probe=False) == [ok("storage", "checked")]
    assert len(calls) >= 2  # the last request, after the run ended, ran the checks again
    assert len(done) == len(calls)
