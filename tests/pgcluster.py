"""A throwaway PostgreSQL cluster on loopback: for the test suite (tests/postgres.py,
the pytest plugin) and the bench (bench/postgres.py), which differ only in
durability.

initdb into a fresh temporary directory, 127.0.0.1 only, a free port, run as the
`postgres` OS user through `runuser` when we are root (the server refuses root),
stopped and deleted at the end. `durable=False` (the tests) turns fsync off for
speed; `durable=True` (the bench) keeps PostgreSQL's defaults, so every commit
waits for its WAL flush. synchronous_commit stays at its default in both.

`PICOBOT_TEST_NO_POSTGRES=1` makes `find_bindir` report no server, to exercise
what happens without one on a machine that has it.
"""

from __future__ import annotations

import itertools
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

__all__ = ["PostgresServer", "find_bindir", "running_cluster"]

START_TIMEOUT = 60  # seconds `pg_ctl start -w` waits for the server to accept connections
OS_USER = "postgres"  # PostgreSQL refuses to run as root; Debian's package creates this user


# --- discovery --------------------------------------------------------------------------


def _version_key(bindir: Path) -> tuple[int, ...]:
    """/usr/lib/postgresql/<version>/bin sorted numerically, so 15 beats 9.6."""
    return tuple(int(part) for part in re.findall(r"\d+", bindir.parent.name))


def find_bindir() -> Path | None:
    """The directory holding initdb and pg_ctl: `pg_config --bindir` when it names
    one that has them (pg_config alone can come from libpq-dev), else the newest
    Debian /usr/lib/postgresql/*/bin; None when there is no server."""
    if os.environ.get("PICOBOT_TEST_NO_POSTGRES"):
        return None
    candidates: list[Path] = []
    if shutil.which("pg_config"):
        result = subprocess.run(
            ["pg_config", "--bindir"], capture_output=True, text=True, check=False, timeout=30
        )
        if result.returncode == 0 and result.stdout.strip():
            candidates.append(Path(result.stdout.strip()))
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=_version_key, reverse=True)
    for bindir in candidates:
        if (bindir / "initdb").is_file() and (bindir / "pg_ctl").is_file():
            return bindir
    return None


# --- the cluster ------------------------------------------------------------------------


def _free_port() -> int:
    """A port nothing listens on right now (the kernel's pick for port 0). Another
    process could take it before the server binds; start() retries on that."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class PostgresServer:
    """One cluster in a temporary directory, owned by the `postgres` OS user when
    the tests run as root (the server refuses root), by the current user otherwise."""

    def __init__(self, bindir: Path, *, durable: bool = False, name_prefix: str = "t") -> None:
        self.bindir = bindir
        self.durable = durable
        self.name_prefix = name_prefix
        self.root = Path(tempfile.mkdtemp(prefix="picobot-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = 0
        self._as_root = os.geteuid() == 0
        self._names = itertools.count(1)
        self._lock = threading.Lock()
        self._started = False

    @property
    def url(self) -> str:
        return self.database_url("postgres")

    def database_url(self, name: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"

    def _run(self, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
        """Run a server binary, through `runuser` when we are root. The working
        directory is the cluster's own, which the server's user can enter."""
        command = [str(self.bindir / args[0]), *args[1:]]
        if self._as_root:
            command = ["runuser", "-u", OS_USER, "--", *command]
        return subprocess.run(
            command, cwd=self.root, capture_output=True, text=True, check=False, timeout=timeout
        )

    def _log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no server log)"

    def start(self) -> None:
        """initdb, configure, then `pg_ctl start -w`; a port taken between our pick
        and the server's bind is retried with another port."""
        if self._as_root:
            user = pwd.getpwnam(OS_USER)  # KeyError: the Debian package is half installed
            os.chown(self.root, user.pw_uid, user.pw_gid)
        self._initdb()
        for _attempt in range(3):
            self.port = _free_port()
            self._configure()
            result = self._run(
                "pg_ctl", "start", "-w", "-t", str(START_TIMEOUT),
                "-D", str(self.data), "-l", str(self.log),
                timeout=START_TIMEOUT + 30,
            )  # fmt: skip
            if result.returncode == 0:
                self._started = True
                return
            if "already in use" not in self._log_tail():
                break
        raise RuntimeError(
            f"pg_ctl start failed ({result.returncode}): {result.stderr.strip()}\n"
            f"server log tail:\n{self._log_tail()}"
        )

    def _initdb(self) -> None:
        result = self._run(
            "initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust",
            "--encoding=UTF8", "--locale=C", "--no-instructions",
            *(() if self.durable else ("--no-sync",)),
            timeout=120,
        )  # fmt: skip
        if result.returncode != 0:
            raise RuntimeError(f"initdb failed ({result.returncode}):\n{result.stderr.strip()}")

    def _configure(self) -> None:
        """Settings in postgresql.auto.conf (rewritten per attempt, so the port can
        change). Not durable: fsync off for speed; synchronous_commit stays at its
        default either way, because the tests measure what a commit guarantees."""
        settings = {
            "listen_addresses": "127.0.0.1",
            "port": str(self.port),
            "unix_socket_directories": str(self.root),
        }
        if not self.durable:
            settings |= {"fsync": "off", "max_connections": "200", "shared_buffers": "32MB"}
        text = "".join(f"{key} = '{value}'\n" for key, value in settings.items())
        # written as the server's user would: the file already exists and we keep its owner
        (self.data / "postgresql.auto.conf").write_text(text)

    def new_database(self) -> str:
        """Create an empty database `<name_prefix>_<n>` and return its URL."""
        with self._lock:
            name = f"{self.name_prefix}_{next(self._names)}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.database_url(name)

    def stop(self) -> None:
        """Immediate stop (nothing to keep), then delete the whole directory."""
        try:
            if self._started:
                self._run(
                    "pg_ctl", "stop", "-m", "immediate", "-w", "-D", str(self.data), timeout=60
                )
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def postmaster_pid(self) -> int:
        """The first line of postmaster.pid (readable by root and by the cluster's owner)."""
        return int((self.data / "postmaster.pid").read_text().split()[0])


@contextmanager
def running_cluster(
    bindir: Path, *, durable: bool = False, name_prefix: str = "t"
) -> Iterator[PostgresServer]:
    """A started cluster, stopped and deleted on the way out."""
    server = PostgresServer(bindir, durable=durable, name_prefix=name_prefix)
    try:
        server.start()
        yield server
    finally:
        server.stop()
