"""Several real `picobot gateway` workers on one PostgreSQL database, behind a
real nginx (issue 54), for the end-to-end cluster tests.

`running_cluster(root, config, size=3, lease_secs=3)` starts `size` workers
from one config dict (`tests.support.process_config`, storage on PostgreSQL),
each with its own home under `root`, its own free `gateway.port` and
`cluster: {"worker_name": "w<i>", "lease_secs": …}`; then nginx on a free
loopback port with the workers' HTTP ports as one upstream (webhooks and the
`/ws` WebSocket upgrade, `proxy_next_upstream error timeout http_502 http_503`,
short connect timeouts; `balancer=False`: no nginx), and waits until every
worker's `/ready` says ready. Each worker's log lines, and whatever a test
adds (`dump_tables`), are kept in `root/logs` for a failure's evidence.

A worker can be SIGKILLed and started again under the same name on the same
port (`Cluster.kill`, `Cluster.restart`), paused and resumed
(`Cluster.pause`, `Cluster.resume`); each start is one `GatewayProcess` (its
JSON log lines: `events`, `wait_event`), and `Worker.events` reads all of a
worker's lives. Everything is stopped at the end: live workers with SIGTERM
(a paused one is resumed first), nginx with SIGTERM.

nginx is Debian's (`apt-get install nginx-light`, as .ci/run does): without
it the tests that need it are skipped locally and fail under CI, like the
PostgreSQL ones (tests/external.py). The figures a test measures go to its
output (`report`), for the bench notes, never into assertions.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import psycopg
from psycopg import sql

from tests.external import External
from tests.support import GatewayProcess, child_env, deep_merge, spawn_gateway, wait_until

__all__ = [
    "Cluster",
    "Nginx",
    "Worker",
    "dump_tables",
    "free_port",
    "query",
    "report",
    "require_nginx",
    "running_cluster",
]

NGINX = External(
    skip_reason="nginx not installed (apt-get install nginx-light); CI runs these",
    ci_failure="nginx not installed, and under CI the cluster tests must run "
    "(.ci/run installs Debian's nginx-light)",
    summary="{count} cluster {tests} skipped: nginx not installed "
    "(apt-get install nginx-light); CI runs these",
)
READY_TIMEOUT = 60.0  # a worker's start on a busy 2-core machine, PostgreSQL on it too


def require_nginx() -> str:
    """The nginx binary (on PATH, or in /usr/sbin where Debian puts it), or
    skip the test (locally) / fail it (under CI)."""
    binary = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")
    NGINX.require(binary is not None)
    assert binary is not None
    return binary


def free_port() -> int:
    """A loopback port nothing listens on right now (the kernel's pick for port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def report(name: str, **figures: object) -> None:
    """One line of measured figures in the test's output (run with -s to see
    it live): what the closing note quotes. Never asserted."""
    print(f"\n[figures] {name}: {json.dumps(figures, default=str)}", flush=True)


async def query(url: str, sql: str, *params: object) -> list[tuple[Any, ...]]:
    """All rows of one read on the cluster's database (a connection of its own)."""

    def run() -> list[tuple[Any, ...]]:
        with psycopg.connect(url, autocommit=True) as conn:
            return [tuple(row) for row in conn.execute(sql, params or None).fetchall()]

    return await asyncio.to_thread(run)


async def dump_tables(url: str, directory: Path, *tables: str) -> Path:
    """Every row of each table as `<table>.jsonl` under `directory` (values as
    text), for a failure's evidence: the test's database is gone after the run."""

    def run() -> None:
        directory.mkdir(parents=True, exist_ok=True)
        with psycopg.connect(url, autocommit=True) as conn:
            for table in tables:
                statement = sql.SQL("SELECT * FROM {} ORDER BY 1").format(sql.Identifier(table))
                cursor = conn.execute(statement)
                names = [c.name for c in cursor.description or ()]
                lines = [
                    json.dumps(dict(zip(names, row, strict=True)), default=str) for row in cursor
                ]
                (directory / f"{table}.jsonl").write_text("".join(line + "\n" for line in lines))

    await asyncio.to_thread(run)
    return directory


# --- nginx ------------------------------------------------------------------------------

_ACCESS_FORMAT = (
    "log_format cluster escape=json "
    '\'{"status":"$status","request":"$request","upstream":"$upstream_addr",'
    '"upstream_status":"$upstream_status","secs":"$request_time"}\';'
)


class Nginx:
    """A real nginx on 127.0.0.1 in front of the workers: its own prefix
    directory (config, pid file, error and access logs, temp files), in the
    foreground (`daemon off`) as a child of the test."""

    def __init__(self, root: Path, upstream_ports: Sequence[int], binary: str) -> None:
        self.root = root
        self.upstream_ports = list(upstream_ports)
        self.binary = binary
        self.port = 0
        self._proc: asyncio.subprocess.Process | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws"

    def config_text(self) -> str:
        root = self.root
        servers = "\n".join(
            # never marked down: a dead worker refuses a connection at once and the
            # request goes to the next, so a restarted one is back at its first
            # request (with nginx's accounting, a burst of reconnects after a kill
            # found every worker marked down: "no live upstreams", 502)
            f"        server 127.0.0.1:{port} max_fails=0;"
            for port in self.upstream_ports
        )
        temp = "\n".join(
            f"    {kind}_temp_path {root / ('temp_' + kind)};"
            for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        )
        # as root the workers would otherwise switch to `nobody`, who cannot
        # write the logs in this directory; as anyone else `user` is ignored
        user = "user root;\n" if os.geteuid() == 0 else ""
        return f"""{user}daemon off;
worker_processes 1;
pid {root / "nginx.pid"};
error_log {root / "error.log"} info;
events {{
    worker_connections 4096;
}}
http {{
{temp}
    {_ACCESS_FORMAT}
    access_log {root / "access.log"} cluster;
    map $http_upgrade $connection_upgrade {{
        default upgrade;
        ''      close;
    }}
    upstream picobot {{
{servers}
    }}
    server {{
        listen 127.0.0.1:{self.port};
        location / {{
            proxy_pass http://picobot;
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            # a dead worker refuses at once; a paused one does not answer
            proxy_connect_timeout 1s;
            # a killed worker's requests go to another. Webhook POSTs too, even
            # when already sent (non_idempotent): the inbox records an event once
            # whoever receives it again. 503: a worker that is stopping.
            proxy_next_upstream error timeout http_502 http_503 non_idempotent;
            proxy_next_upstream_timeout 10s;
            proxy_send_timeout 30s;
            proxy_read_timeout 1h;
            proxy_buffering off;
        }}
    }}
}}
"""

    async def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        for attempt in range(3):  # another process may take the free port first
            self.port = free_port()
            conf = self.root / "nginx.conf"
            conf.write_text(self.config_text())
            with (self.root / "stderr.log").open("ab") as out:
                self._proc = await asyncio.create_subprocess_exec(
                    self.binary, "-p", str(self.root), "-c", str(conf),
                    "-e", str(self.root / "error.log"),
                    stdin=asyncio.subprocess.DEVNULL, stdout=out, stderr=out,
                )  # fmt: skip
            try:
                await wait_until(self._listening, timeout=15)
                return
            except (TimeoutError, RuntimeError):
                await self.stop()
                if attempt == 2 or "Address already in use" not in self.error_log():
                    raise RuntimeError(f"nginx did not start:\n{self.error_log()}") from None

    async def _listening(self) -> bool:
        assert self._proc is not None
        if self._proc.returncode is not None:
            raise RuntimeError(f"nginx exited ({self._proc.returncode}):\n{self.error_log()}")
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", self.port)
        except OSError:
            return False
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        return True

    async def stop(self) -> int | None:
        """Fast shutdown (SIGTERM: open WebSocket connections are not waited for)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        try:
            return await asyncio.wait_for(proc.wait(), 15)
        except TimeoutError:
            proc.kill()
            return await proc.wait()

    def error_log(self, lines: int = 40) -> str:
        paths = [self.root / name for name in ("stderr.log", "error.log")]
        texts = [p.read_text(errors="replace").splitlines()[-lines:] for p in paths if p.exists()]
        return "\n".join(line for text in texts for line in text)

    def access_log(self) -> list[dict[str, str]]:
        """Per request finished (a WebSocket: when closed): `status`, `request`,
        `upstream` (the workers tried, comma separated), `upstream_status`, `secs`."""
        path = self.root / "access.log"
        lines = path.read_text().splitlines() if path.exists() else []
        return [json.loads(line) for line in lines if line.strip()]


# --- the workers ------------------------------------------------------------------------


@dataclass
class Worker:
    """One worker: a name, a port and a home that stay across its lives."""

    index: int
    name: str
    port: int
    home: Path
    config: dict[str, Any]
    lives: list[GatewayProcess] = field(default_factory=list)
    paused: bool = False

    @property
    def current(self) -> GatewayProcess:
        """The latest start (running or not)."""
        if not self.lives:
            raise RuntimeError(f"worker {self.name} never started")
        return self.lives[-1]

    @property
    def alive(self) -> bool:
        return bool(self.lives) and self.current.proc.returncode is None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def events(self, name: str) -> list[dict[str, Any]]:
        """Log lines of event `name` over all of this worker's lives, in order."""
        return [line for life in self.lives for line in life.events(name)]


class Cluster:
    """`size` workers on one database behind one nginx (none with
    `balancer=False`, for tests that reach no worker from outside); see the
    module docstring."""

    def __init__(
        self,
        root: Path,
        config: dict[str, Any],
        *,
        size: int = 3,
        lease_secs: float = 3,
        balancer: bool = True,
        ready_timeout: float = READY_TIMEOUT,
    ) -> None:
        self.root = root
        self.ready_timeout = ready_timeout
        self.workers: list[Worker] = []
        for i in range(size):
            name = f"w{i}"
            home = root / name
            home.mkdir(parents=True, exist_ok=True)
            port = free_port()
            own = {
                "gateway": {"port": port},
                "cluster": {"worker_name": name, "lease_secs": lease_secs},
            }
            self.workers.append(Worker(i, name, port, home, deep_merge(config, own)))
        ports = [w.port for w in self.workers]
        self._nginx = Nginx(root / "nginx", ports, require_nginx()) if balancer else None
        self._http: aiohttp.ClientSession | None = None
        self.exit_codes: dict[str, int | None] = {}  # by worker name, once stopped

    @property
    def nginx(self) -> Nginx:
        if self._nginx is None:
            raise RuntimeError("this cluster was started without a balancer")
        return self._nginx

    def __getitem__(self, index: int) -> Worker:
        return self.workers[index]

    @property
    def storage_url(self) -> str:
        return str(self.workers[0].config["storage"]["url"])

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        self._http = aiohttp.ClientSession()
        await asyncio.gather(*(self._spawn(w) for w in self.workers))
        if self._nginx is not None:
            await self._nginx.start()
        await asyncio.gather(*(self.wait_ready(w.index) for w in self.workers))

    async def _spawn(self, worker: Worker) -> GatewayProcess:
        life = await spawn_gateway(worker.config, worker.home, child_env(worker.home))
        worker.lives.append(life)
        worker.paused = False
        return life

    async def stop(self) -> dict[str, int | None]:
        """Every live worker with SIGTERM (resumed first if paused), then nginx;
        the exit codes by worker name (None: it was dead already), also kept
        in `exit_codes`."""
        codes = self.exit_codes
        try:
            for w in self.workers:
                if w.paused and w.alive:
                    self.resume(w.index)

            async def stop_one(w: Worker) -> None:
                if not w.lives:
                    codes[w.name] = None
                    return
                was_alive = w.alive
                try:
                    code = await w.current.stop(signal.SIGTERM, timeout=30)
                except TimeoutError:
                    code = await w.current.stop(signal.SIGKILL, timeout=10)
                codes[w.name] = code if was_alive else None

            await asyncio.gather(*(stop_one(w) for w in self.workers))
        finally:
            if self._nginx is not None:
                await self._nginx.stop()
            if self._http is not None:
                await self._http.close()
        return codes

    # -- chaos -----------------------------------------------------------------------------

    async def kill(self, index: int) -> None:
        """SIGKILL the worker and wait for its exit (its log read to the end)."""
        worker = self.workers[index]
        code = await worker.current.stop(signal.SIGKILL, timeout=15)
        worker.paused = False
        if code != -signal.SIGKILL:
            raise RuntimeError(f"worker {worker.name} exited with {code} before the kill")

    async def restart(self, index: int, *, ready: bool = True) -> GatewayProcess:
        """Start the (dead) worker again: same name, same port, same home;
        returns once its `/ready` says ready (or at once with `ready=False`)."""
        worker = self.workers[index]
        if worker.alive:
            raise RuntimeError(f"worker {worker.name} is still running")
        life = await self._spawn(worker)
        if ready:
            await self.wait_ready(index)
        return life

    def pause(self, index: int) -> None:
        worker = self.workers[index]
        worker.current.proc.send_signal(signal.SIGSTOP)
        worker.paused = True

    def resume(self, index: int) -> None:
        worker = self.workers[index]
        worker.current.proc.send_signal(signal.SIGCONT)
        worker.paused = False

    # -- probes --------------------------------------------------------------------------

    async def ready_body(self, index: int) -> tuple[int, dict[str, Any]]:
        """The worker's own `/ready` answer (straight to its port, not through nginx)."""
        assert self._http is not None
        url = self.workers[index].base_url + "/ready"
        async with self._http.get(url, timeout=aiohttp.ClientTimeout(total=5)) as resp:
            body: dict[str, Any] = await resp.json(content_type=None)
            return resp.status, body

    async def wait_ready(self, index: int, timeout: float | None = None) -> dict[str, Any]:
        """Until the worker's `/ready` answers 200; its body then."""
        worker = self.workers[index]
        life = worker.current
        body: dict[str, Any] = {}

        async def ready() -> bool:
            nonlocal body
            if life.proc.returncode is not None:
                raise RuntimeError(f"worker {worker.name} exited: {life.lines[-10:]}")
            try:
                status, body = await self.ready_body(index)
            except (aiohttp.ClientError, TimeoutError, ValueError):
                return False
            return status == 200

        try:
            await wait_until(ready, timeout=timeout or self.ready_timeout)
        except TimeoutError:
            raise TimeoutError(f"worker {worker.name} not ready: {body}") from None
        return body

    def events(self, name: str) -> list[dict[str, Any]]:
        """Log lines of event `name` from every worker and life."""
        return [line for w in self.workers for line in w.events(name)]

    def dump_logs(self, directory: Path) -> Path:
        """Every life's log lines as `<name>-<life>.jsonl` under `directory`
        (nginx's logs are in its own directory already), for a failure's
        evidence; returns `directory`."""
        directory.mkdir(parents=True, exist_ok=True)
        for w in self.workers:
            for n, life in enumerate(w.lives):
                text = "".join(json.dumps(line) + "\n" for line in life.lines)
                (directory / f"{w.name}-{n}.jsonl").write_text(text)
        return directory


@asynccontextmanager
async def running_cluster(
    root: Path,
    config: dict[str, Any],
    *,
    size: int = 3,
    lease_secs: float = 3,
    balancer: bool = True,
) -> AsyncIterator[Cluster]:
    """A started cluster (`Cluster.start`), stopped on the way out whatever
    happened, its workers' logs then written to `root/logs` (`dump_logs`)."""
    cluster = Cluster(root, config, size=size, lease_secs=lease_secs, balancer=balancer)
    started = time.monotonic()
    try:
        await cluster.start()
        report("cluster_start", workers=size, secs=round(time.monotonic() - started, 2))
        yield cluster
    finally:
        try:
            await cluster.stop()
        finally:
            cluster.dump_logs(root / "logs")
