"""deploy/scale-out/ (docs/scale-out.md): PostgreSQL, nginx and three workers,
as Docker Compose and as a systemd template unit. No container engine runs on
the development machines, so the compose file is parsed and the configs it
mounts validated; the unit is verified by systemd where it is installed; the
nginx configuration passes `nginx -t` and is run in front of three stand-in
workers (Debian's nginx: apt-get install nginx)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pytest
import yaml
from aiohttp import web

from gateway.config.core import Config
from gateway.config.loading import parse_config
from tests.external import External
from tests.support import wait_until
from tests.test_deploy import UNIT, free_port, parse_unit, seconds

ROOT = Path(__file__).resolve().parent.parent
HERE = ROOT / "deploy" / "scale-out"
COMPOSE = HERE / "compose.yaml"
TEMPLATE = HERE / "systemd" / "picobot@.service"
HOST_CONFIG = HERE / "systemd" / "picobot.json"
NGINX_SITE = HERE / "nginx" / "picobot.conf"
WORKERS_HOST = HERE / "nginx" / "workers-host.conf"
WORKERS_COMPOSE = HERE / "nginx" / "workers-compose.conf"
PUBLIC_NAME = "chat.example.com"
WORKERS = ("picobot-1", "picobot-2", "picobot-3")

NGINX = External(
    skip_reason="nginx not installed",
    ci_failure="nginx not installed: CI must install it (apt-get install nginx)",
    summary="nginx not found: {count} deploy {tests} skipped; apt-get install -y nginx",
)


def env_example(path: Path) -> dict[str, str]:
    lines = path.read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def named_vars(path: Path) -> set[str]:
    return set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)", path.read_text()))


def upstream_servers(path: Path) -> list[str]:
    """The `server host:port` lines of the upstream block, in order."""
    return re.findall(r"^\s*server\s+(\S+?)[\s;]", path.read_text(), flags=re.MULTILINE)


def config_of(path: Path, env: dict[str, str]) -> Config:
    config, missing = parse_config(json.loads(path.read_text()), env, source=str(path))
    assert missing == {}, missing
    return config


# -- compose ---------------------------------------------------------------------
def test_compose_runs_postgres_three_workers_on_one_config_and_nginx_in_front() -> None:
    compose = yaml.safe_load(COMPOSE.read_text())
    services = compose["services"]
    assert set(services) == {"postgres", *WORKERS, "nginx"}

    postgres = services["postgres"]
    assert "pg_isready" in " ".join(postgres["healthcheck"]["test"])
    db_env = env_example(HERE / f"{postgres['env_file'][0]}.example")
    assert set(db_env) == {"POSTGRES_PASSWORD"}  # the database sees no other secret

    [config_mount] = {v for w in WORKERS for v in services[w]["volumes"] if v.endswith(":ro")}
    source, target, _ = config_mount.split(":")
    config_file = HERE / source
    env: dict[str, str] = {}
    for name in WORKERS:
        worker = services[name]
        build = worker["build"]
        assert (HERE / build["context"] / build["dockerfile"]).resolve() == ROOT / "Dockerfile"
        assert worker["command"] == ["picobot", "gateway", "--config", target]
        assert worker["hostname"] == name
        assert worker["depends_on"]["postgres"]["condition"] == "service_healthy"
        assert "ports" not in worker  # reached through nginx only
        # one home for all: received files and the workspace, whichever worker runs a turn
        assert "picobot-data:/data" in worker["volumes"]
        for env_file in worker["env_file"]:
            ignored = subprocess.run(
                ["git", "check-ignore", "-q", str(HERE / env_file)], cwd=ROOT, check=False
            )
            assert ignored.returncode == 0, f"{env_file} must be git-ignored"
            env |= env_example(HERE / f"{env_file}.example")
    assert named_vars(config_file) <= set(env)

    config = config_of(config_file, env)
    assert config.storage.url is not None
    url = urlsplit(config.storage.url)
    assert (url.scheme, url.hostname, url.port) == ("postgresql", "postgres", 5432)
    assert url.username == postgres["environment"]["POSTGRES_USER"]
    assert url.path == "/" + postgres["environment"]["POSTGRES_DB"]
    assert url.password == db_env["POSTGRES_PASSWORD"]
    assert (config.gateway.host, config.gateway.port) == ("0.0.0.0", 19876)
    assert config.gateway.auth_token is not None
    assert PUBLIC_NAME in config.gateway.public_hosts
    assert config.cluster.worker_name == ""  # each worker named <hostname>:19876
    for name in WORKERS:
        grace = seconds(services[name]["stop_grace_period"])
        assert grace > config.gateway.shutdown_timeout_secs

    # nginx: the site and the workers' addresses where the site includes them
    nginx = services["nginx"]
    mounts = dict(v.removesuffix(":ro").split(":") for v in nginx["volumes"])
    assert (HERE / "nginx").resolve() / "picobot.conf" in {
        (HERE / s).resolve() for s, t in mounts.items() if t.startswith("/etc/nginx/conf.d/")
    }
    assert mounts["./nginx/workers-compose.conf"] == "/etc/nginx/picobot-workers.conf"
    assert "include picobot-workers.conf;" in NGINX_SITE.read_text()
    assert upstream_servers(WORKERS_COMPOSE) == [f"{w}:{config.gateway.port}" for w in WORKERS]
    assert set(nginx["depends_on"]) == set(WORKERS)
    [published] = nginx["ports"]
    assert published.startswith("127.0.0.1:")
    assert published.endswith(":80")
    assert re.search(r"^\s*listen 80;", NGINX_SITE.read_text(), flags=re.MULTILINE)
    assert f"server_name {PUBLIC_NAME};" in NGINX_SITE.read_text()


# -- systemd ---------------------------------------------------------------------
def test_the_template_unit_is_the_single_unit_with_one_port_per_instance() -> None:
    single = parse_unit(UNIT.read_text())["Service"]
    template = parse_unit(TEMPLATE.read_text())
    service = template["Service"]
    # everything of deploy/picobot.service (the command, restarts, the stop
    # budget, every hardening key) holds for each worker too
    for key, values in single.items():
        if key in ("Environment", "EnvironmentFile"):
            assert set(values) <= set(service[key]), key
        else:
            assert service.get(key) == values, key
    assert "PICOBOT_PORT=%i" in service["Environment"]
    assert "/etc/picobot/postgresql.env" in service["EnvironmentFile"]
    assert "postgresql.service" in " ".join(template["Unit"]["After"])
    assert "%i" in template["Unit"]["Description"][0]

    # the instances the comments enable are the workers nginx balances over
    ports = [int(s.rsplit(":", 1)[1]) for s in upstream_servers(WORKERS_HOST)]
    assert all(s.startswith("127.0.0.1:") for s in upstream_servers(WORKERS_HOST))
    assert len(set(ports)) == 3
    for text in (TEMPLATE.read_text(), (HERE / "README.md").read_text()):
        enabled = re.search(r"enable --now ((?:picobot@\d+ ?)+)", text)
        assert enabled is not None
        assert [int(p) for p in re.findall(r"@(\d+)", enabled.group(1))] == ports

    # one config for every instance, its port from the instance's name
    secrets = env_example(ROOT / "deploy" / "postgresql" / "postgresql.env.example")
    env = {"OPENAI_API_KEY": "sk-test", "PICOBOT_TOKEN": "t" * 24, **secrets}
    defaulted = {"OPENAI_BASE_URL", "OPENAI_MODEL"}  # ${VAR:-default}
    assert named_vars(HOST_CONFIG) - defaulted - {"PICOBOT_PORT"} <= set(env)
    for port in ports:
        config = config_of(HOST_CONFIG, {**env, "PICOBOT_PORT": str(port)})
        assert (config.gateway.host, config.gateway.port) == ("127.0.0.1", port)
        # behind a proxy on this host every request is from 127.0.0.1: a token is a must
        assert config.gateway.auth_token is not None
        assert PUBLIC_NAME in config.gateway.public_hosts
        assert config.storage.url is not None
        assert config.storage.url.startswith("postgresql://")
        assert seconds(service["TimeoutStopSec"][0]) > config.gateway.shutdown_timeout_secs


def test_systemd_accepts_the_template_unit(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:  # no systemd here: the parse above is the check
        assert parse_unit(TEMPLATE.read_text())["Service"]
        return
    text = TEMPLATE.read_text().replace("/opt/picobot/.venv/bin/picobot", sys.executable)
    (tmp_path / "picobot@.service").write_text(text)
    instance = tmp_path / "picobot@19876.service"  # verified through the template
    result = subprocess.run(
        [analyze, "verify", str(instance)], capture_output=True, text=True, timeout=120, check=False
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "picobot@" not in output, output  # unknown or invalid keys are only warnings


# -- nginx -----------------------------------------------------------------------
def nginx_binary() -> str | None:
    found = shutil.which("nginx") or "/usr/sbin/nginx"
    return found if os.access(found, os.X_OK) else None


def nginx_prefix(tmp: Path, workers: str, listen: str = "80") -> Path:
    """A prefix directory holding the site as shipped, `workers` as
    picobot-workers.conf and a main nginx.conf that includes the site (the
    http context of Debian's and the official image's nginx.conf)."""
    site = NGINX_SITE.read_text().replace("listen 80;", f"listen {listen};")
    assert "listen 80;" in NGINX_SITE.read_text()
    (tmp / "picobot.conf").write_text(site)
    (tmp / "picobot-workers.conf").write_text(workers)
    temps = " ".join(
        f"{kind}_temp_path {tmp / kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    (tmp / "nginx.conf").write_text(
        f"worker_processes 1;\npid {tmp / 'nginx.pid'};\nerror_log {tmp / 'error.log'};\n"
        f"events {{}}\nhttp {{\n  access_log off;\n  {temps}\n  include picobot.conf;\n}}\n"
    )
    return tmp / "nginx.conf"


def nginx_test(nginx: str, conf: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [nginx, "-t", "-p", str(conf.parent), "-c", str(conf), "-e", str(conf.parent / "e.log")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("workers", [WORKERS_HOST, WORKERS_COMPOSE], ids=["host", "compose"])
def test_nginx_accepts_the_balancer_config(workers: Path, tmp_path: Path) -> None:
    nginx = nginx_binary()
    NGINX.require(nginx is not None)
    assert nginx is not None
    text = workers.read_text()
    for name in WORKERS:  # a stub for the compose names, which only Docker's DNS knows
        text = text.replace(f"{name}:", "127.0.0.1:")
    result = nginx_test(nginx, nginx_prefix(tmp_path, text))
    assert result.returncode == 0, result.stderr
    # the check can fail: a directive nginx does not know
    (tmp_path / "picobot.conf").write_text(NGINX_SITE.read_text() + "\nproxy_retry_all on;\n")
    assert nginx_test(nginx, tmp_path / "nginx.conf").returncode != 0


@dataclass
class StandIn:
    """A stand-in worker: records what reached it; `refuse_webhooks` answers
    503 to webhooks, as a worker does while it stops."""

    refuse_webhooks: bool = False
    seen: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    port: int = 0

    def app(self) -> web.Application:
        async def any_request(request: web.Request) -> web.StreamResponse:
            self.seen.append((request.method, request.path, dict(request.headers)))
            if request.path == "/ws":
                ws = web.WebSocketResponse()
                await ws.prepare(request)
                async for message in ws:
                    await ws.send_str(f"{self.port}:{message.data}")
                return ws
            if request.path.startswith("/webhooks/") and self.refuse_webhooks:
                return web.json_response({"error": "stopping"}, status=503)
            return web.json_response({"worker": self.port})

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", any_request)
        return app


@asynccontextmanager
async def stand_ins(workers: list[StandIn]) -> AsyncIterator[None]:
    runners = []
    try:
        for worker in workers:
            runner = web.AppRunner(worker.app(), access_log=None)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", 0).start()
            worker.port = runner.addresses[0][1]
            runners.append(runner)
        yield
    finally:
        for runner in runners:
            await runner.cleanup()


@asynccontextmanager
async def running_nginx(nginx: str, conf: Path, port: int) -> AsyncIterator[str]:
    process = await asyncio.create_subprocess_exec(
        nginx, "-p", str(conf.parent), "-c", str(conf), "-e", str(conf.parent / "e.log"),
        "-g", "daemon off;", stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip

    async def listening() -> bool:
        assert process.returncode is None, "nginx exited"
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            return False
        writer.close()
        return True

    try:
        await wait_until(listening, timeout=30)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), 30)


def _hits(worker: StandIn, path: str) -> list[dict[str, str]]:
    return [headers for _, p, headers in worker.seen if p == path]


async def test_nginx_spreads_websockets_and_retries_webhooks_over_the_workers(
    tmp_path: Path,
) -> None:
    nginx = nginx_binary()
    NGINX.require(nginx is not None)
    assert nginx is not None
    stopping, *others = workers = [StandIn(refuse_webhooks=True), StandIn(), StandIn()]
    async with stand_ins(workers):
        upstream = "\n".join(f"server 127.0.0.1:{w.port};" for w in workers)
        text = re.sub(r"(?m)^\s*server\s+\S+.*$", "", WORKERS_HOST.read_text())
        text = text.replace("least_conn;", f"least_conn;\n{upstream}")
        port = free_port()
        conf = nginx_prefix(tmp_path, text, listen=f"127.0.0.1:{port}")
        headers = {"Host": PUBLIC_NAME}
        async with running_nginx(nginx, conf, port) as base, aiohttp.ClientSession() as http:
            # a WebSocket passes through, upgraded, to one worker and stays open
            async with http.ws_connect(f"{base}/ws", headers=headers) as ws:
                await ws.send_str("hello")
                reply = await ws.receive_str()
                assert reply.endswith(":hello")
                assert int(reply.split(":")[0]) in {w.port for w in workers}
            # webhooks: every one accepted, those the stopping worker refused by another
            answers: list[int] = []
            for n in range(12):
                if _hits(stopping, "/webhooks/telegram") and len(answers) >= 3:
                    break
                async with http.post(
                    f"{base}/webhooks/telegram", json={"update_id": n}, headers=headers
                ) as response:
                    answers.append(response.status)
            assert _hits(stopping, "/webhooks/telegram"), "no webhook reached the refusing worker"
            assert answers == [200] * len(answers)
            delivered = sum(len(_hits(w, "/webhooks/telegram")) for w in others)
            assert delivered == len(answers)
            # the workers' own figures are not served through the balancer
            async with http.get(f"{base}/metrics", headers=headers) as response:
                assert response.status == 404
            assert not any(_hits(w, "/metrics") for w in workers)
            # the rest reaches a worker with the public name and the client's address
            async with http.get(f"{base}/ready", headers=headers) as response:
                assert response.status == 200
                body: dict[str, Any] = await response.json()
        [seen] = [h for w in workers for h in _hits(w, "/ready")]
    assert body["worker"] in {w.port for w in workers}
    assert seen["Host"] == PUBLIC_NAME
    assert seen["X-Forwarded-For"] == "127.0.0.1"
    for w in workers:
        for headers_seen in _hits(w, "/ws"):
            assert headers_seen["Upgrade"].lower() == "websocket"
