"""Deployment files: the systemd unit (verified by systemd when it is installed), the
Dockerfile and deploy/compose.yaml (parsed: no container engine runs on the
development machines)."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import yaml
from aiohttp import web

from gateway.config.core import GatewayConfig
from gateway.config.loading import parse_config

ROOT = Path(__file__).resolve().parent.parent
UNIT = ROOT / "deploy" / "picobot.service"
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"


# -- systemd ---------------------------------------------------------------------
def parse_unit(text: str) -> dict[str, dict[str, list[str]]]:
    """Sections → key → every value (systemd keys may repeat, e.g. Environment=)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        assert current is not None, f"key outside a section: {line}"
        key, sep, value = line.partition("=")
        assert sep, f"not a key=value line: {line}"
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def seconds(value: str) -> float:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(s|min)?", value)
    assert match, value
    return float(match.group(1)) * (60 if match.group(2) == "min" else 1)


def test_systemd_unit_runs_the_gateway_as_a_hardened_service() -> None:
    unit = parse_unit(UNIT.read_text())
    service = {key: values[-1] for key, values in unit["Service"].items()}

    assert service["Type"] == "simple"
    assert service["User"] == "picobot"
    assert service["ExecStart"] == (
        "/opt/picobot/.venv/bin/picobot gateway --config /etc/picobot/config.json"
    )
    assert service["Restart"] == "on-failure"
    assert seconds(service["RestartSec"]) > 0
    assert "PICOBOT_HOME=/var/lib/picobot" in unit["Service"]["Environment"]
    assert service["EnvironmentFile"] == "-/etc/picobot/env"  # optional file
    assert service["KillSignal"] == "SIGTERM"
    # systemd must wait longer than the gateway's own graceful shutdown.
    assert seconds(service["TimeoutStopSec"]) > GatewayConfig().shutdown_timeout_secs
    hardening = {
        "NoNewPrivileges": "true",
        "ProtectSystem": "strict",
        "ProtectHome": "true",
        "ReadWritePaths": "/var/lib/picobot",
        "PrivateTmp": "true",
        "ProtectKernelTunables": "true",
        "ProtectKernelModules": "true",
        "ProtectControlGroups": "true",
        "RestrictSUIDSGID": "true",
        "CapabilityBoundingSet": "",
    }
    for key, expected in hardening.items():
        assert service.get(key) == expected, key
    assert unit["Install"]["WantedBy"] == ["multi-user.target"]
    assert "network-online.target" in unit["Unit"]["After"][0]


def test_systemd_accepts_the_unit(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        # No systemd here: the parse above is the check. Still prove the file parses.
        assert parse_unit(UNIT.read_text())["Service"]
        return
    # verify insists that ExecStart exists; everything else is checked as written.
    text = UNIT.read_text().replace("/opt/picobot/.venv/bin/picobot", sys.executable)
    copy = tmp_path / "picobot.service"
    copy.write_text(text)
    result = subprocess.run(
        [analyze, "verify", str(copy)], capture_output=True, text=True, timeout=120, check=False
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    # Unknown or invalid keys are only warnings to systemd; they are errors here.
    assert "picobot.service" not in output, output


# -- Dockerfile ------------------------------------------------------------------
def parse_dockerfile(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue  # a comment inside a continued instruction
        if line.endswith("\\"):
            pending += line[:-1].strip() + " "
            continue
        full = (pending + line).strip()
        pending = ""
        word, _, rest = full.partition(" ")
        instructions.append((word.upper(), rest.strip()))
    assert not pending, "dangling line continuation"
    return instructions


def stages(instructions: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    result: list[list[tuple[str, str]]] = []
    for instruction in instructions:
        if instruction[0] == "FROM":
            result.append([])
        assert result, "an instruction before the first FROM"
        result[-1].append(instruction)
    return result


def args_of(stage: list[tuple[str, str]], word: str) -> list[str]:
    return [rest for w, rest in stage if w == word]


def healthcheck_code(final: list[tuple[str, str]]) -> tuple[str, str]:
    (health,) = args_of(final, "HEALTHCHECK")
    options, _, command = health.partition(" CMD ")
    argv = json.loads(command)
    assert argv[:2] == ["python", "-c"]
    return options, argv[2]


def test_dockerfile_shape() -> None:
    all_stages = stages(parse_dockerfile(DOCKERFILE.read_text()))
    for stage in all_stages:
        assert stage[0][1].split()[0] == "python:3.11-slim"
    final = all_stages[-1]
    words = [w for w, _ in final]

    assert any("pip install ." in run for stage in all_stages for run in args_of(stage, "RUN"))
    assert any(c.startswith("--from=") for c in args_of(final, "COPY"))
    (user,) = args_of(final, "USER")
    assert user not in {"root", "0"}
    assert not user.startswith(("root:", "0:"))
    assert words.index("USER") < words.index("CMD")
    assert args_of(final, "VOLUME") == ["/data"]
    assert args_of(final, "EXPOSE") == ["19876"]
    assert "PICOBOT_HOME=/data" in " ".join(args_of(final, "ENV"))
    assert json.loads(args_of(final, "CMD")[0]) == ["picobot", "gateway"]
    options, code = healthcheck_code(final)
    assert "--interval=" in options
    assert "http://127.0.0.1:19876/health" in code
    compile(code, "<healthcheck>", "exec")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def run_python(code: str) -> int:
    process = await asyncio.create_subprocess_exec(sys.executable, "-c", code)
    return await asyncio.wait_for(process.wait(), timeout=30)


async def test_dockerfile_healthcheck_command_tells_up_from_down() -> None:
    _, code = healthcheck_code(stages(parse_dockerfile(DOCKERFILE.read_text()))[-1])

    async def health(_request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    app = web.Application()
    app.router.add_get("/health", health)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        port = runner.addresses[0][1]
        assert await run_python(code.replace("127.0.0.1:19876", f"127.0.0.1:{port}")) == 0
    finally:
        await runner.cleanup()
    assert await run_python(code.replace("127.0.0.1:19876", f"127.0.0.1:{free_port()}")) != 0


def test_dockerignore_keeps_secrets_and_local_state_out() -> None:
    patterns = {
        line.strip()
        for line in DOCKERIGNORE.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    for required in (".git", ".venv", "config.json", "**/*.db", "tests", ".env"):
        assert required in patterns, required
    # What `pip install .` needs must not be excluded.
    for needed in ("pyproject.toml", "README.md", "gateway", "skills"):
        assert needed not in patterns


# -- compose ---------------------------------------------------------------------
COMPOSE = ROOT / "deploy" / "compose.yaml"


def test_compose_runs_the_image_with_a_valid_config_and_its_secrets_outside() -> None:
    compose = yaml.safe_load(COMPOSE.read_text())
    [(name, service)] = compose["services"].items()
    assert name == "picobot"
    build = service["build"]
    assert (COMPOSE.parent / build["context"] / build["dockerfile"]).resolve() == DOCKERFILE
    # the data volume is PICOBOT_HOME of the image; the config is mounted read-only
    assert "picobot-data:/data" in service["volumes"]
    [mount] = [v for v in service["volumes"] if v.endswith(":ro")]
    source, target, _ = mount.split(":")
    assert service["command"] == ["picobot", "gateway", "--config", target]
    config_file = COMPOSE.parent / source
    # published on the host's loopback only
    assert service["ports"] == ["127.0.0.1:19876:19876"]
    # every variable the config names is in the env file's example, which git ignores
    [env_file] = service["env_file"]
    example = (COMPOSE.parent / f"{env_file}.example").read_text()
    given = dict(
        line.split("=", 1) for line in example.splitlines() if line and not line.startswith("#")
    )
    named = re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)", config_file.read_text())
    assert set(named) <= set(given)
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", str(COMPOSE.parent / env_file)], cwd=ROOT, check=False
    )
    assert ignored.returncode == 0, f"{env_file} must be git-ignored"
    # the config is what the gateway accepts, and listens where the port is published
    config, missing = parse_config(json.loads(config_file.read_text()), given, source=source)
    assert missing == {}
    assert (config.gateway.host, config.gateway.port) == ("0.0.0.0", 19876)
    assert config.gateway.auth_token is not None
    grace = float(service["stop_grace_period"].removesuffix("s"))
    assert grace > config.gateway.shutdown_timeout_secs


# -- the lock file ---------------------------------------------------------------
def test_make_install_uses_a_lock_of_every_dependency_with_hashes() -> None:
    """A fresh machine gets what CI tested: `make install` installs
    requirements.lock with --require-hashes, and the lock pins every
    dependency of pyproject.toml (runtime and dev)."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    wanted = [*project["dependencies"], *project["optional-dependencies"]["dev"]]
    lock = (ROOT / "requirements.lock").read_text(encoding="utf-8")
    pins = dict(re.findall(r"^([a-z0-9._-]+)==(\S+) \\$", lock, flags=re.MULTILINE))
    for requirement in wanted:
        name = re.split(r"[\[<>=!~ ]", requirement, maxsplit=1)[0].lower().replace("_", "-")
        assert name in pins, f"{name} is not in requirements.lock: run `make lock`"
    blocks = re.split(r"^(?=[a-z0-9._-]+==)", lock, flags=re.MULTILINE)[1:]
    assert len(blocks) == len(pins)
    assert all("--hash=sha256:" in block for block in blocks)
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "--require-hashes -r $(LOCK)" in makefile
    assert "--no-deps -e ." in makefile
