"""A throwaway PostgreSQL cluster for the test suite (issue 53).

The cluster is started lazily, the first time a test asks for `postgres_server`
(directly, or through `postgres_url` / `storage_url`), so a run that needs no
PostgreSQL never pays for `initdb`. It lives in a fresh temporary directory,
listens on 127.0.0.1 only, on a free port, and is stopped and deleted at the end
of the session. Each test gets its own empty database (`CREATE DATABASE`).

Without PostgreSQL binaries the tests that need them are skipped locally, and the
summary says how many; under CI (the `CI` environment variable set) the same
absence is an error, so CI can never silently stop running them.

Public API, registered as a pytest plugin from tests/conftest.py:

- fixture `postgres_server` (session): `PostgresServer` with `.url`, `.port`,
  `.new_database() -> str`;
- fixture `postgres_url` (function): the URL of a fresh empty database;
- marker `postgres`: the test needs PostgreSQL (skipped, or an error under CI);
- `storage_backends`: a parametrize mark over `backend` = "sqlite", "postgres";
- fixture `storage_url(backend)`: a SQLite file URL in `tmp_path`, or a fresh
  PostgreSQL database URL (the cluster starts only for the postgres case).

`PICOBOT_TEST_NO_POSTGRES=1` makes discovery report PostgreSQL as not installed,
to exercise the skip and the CI error on a machine that has it.
"""

from __future__ import annotations

import functools
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
from pathlib import Path

import psycopg
import pytest

__all__ = [
    "SKIP_REASON",
    "PostgresServer",
    "find_bindir",
    "postgres_server",
    "postgres_url",
    "storage_backends",
    "storage_url",
]

SKIP_REASON = "PostgreSQL not installed (apt-get install postgresql); CI runs these"
START_TIMEOUT = 60  # seconds `pg_ctl start -w` waits for the server to accept connections
OS_USER = "postgres"  # PostgreSQL refuses to run as root; Debian's package creates this user

storage_backends = pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)


# --- discovery --------------------------------------------------------------------------


def _version_key(bindir: Path) -> tuple[int, ...]:
    """/usr/lib/postgresql/<version>/bin sorted numerically, so 15 beats 9.6."""
    return tuple(int(part) for part in re.findall(r"\d+", bindir.parent.name))


@functools.cache  # asked once per marked test; the answer cannot change in a run
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


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def require_postgres() -> Path:
    """The binaries' directory, or skip the test (locally) / fail it (under CI)."""
    bindir = find_bindir()
    if bindir is None:
        if _in_ci():
            pytest.fail(
                "PostgreSQL not installed, and under CI the PostgreSQL tests must run "
                "(.ci/run installs Debian's postgresql)",
                pytrace=False,
            )
        pytest.skip(SKIP_REASON)
    return bindir


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

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
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
            "--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions",
            timeout=120,
        )  # fmt: skip
        if result.returncode != 0:
            raise RuntimeError(f"initdb failed ({result.returncode}):\n{result.stderr.strip()}")

    def _configure(self) -> None:
        """Settings in postgresql.auto.conf (rewritten per attempt, so the port can
        change). fsync is off for speed; synchronous_commit stays at its default
        because the tests measure what a commit guarantees."""
        settings = {
            "listen_addresses": "127.0.0.1",
            "port": str(self.port),
            "unix_socket_directories": str(self.root),
            "fsync": "off",
            "max_connections": "200",
            "shared_buffers": "32MB",
        }
        text = "".join(f"{key} = '{value}'\n" for key, value in settings.items())
        # written as the server's user would: the file already exists and we keep its owner
        (self.data / "postgresql.auto.conf").write_text(text)

    def new_database(self) -> str:
        """Create an empty database `t_<n>` and return its URL."""
        with self._lock:
            name = f"t_{next(self._names)}"
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


# --- fixtures and hooks -----------------------------------------------------------------


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """The session's cluster, started on first use (skipped or failed without binaries)."""
    server = PostgresServer(require_postgres())
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """A fresh, empty database on the session's cluster."""
    return postgres_server.new_database()


@pytest.fixture
def storage_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """The storage URL for the parametrised `backend`; only "postgres" starts the
    cluster, so a run of sqlite cases alone never needs PostgreSQL."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'storage.db'}"
    if backend == "postgres":
        server: PostgresServer = request.getfixturevalue("postgres_server")
        return server.new_database()
    raise ValueError(f"unknown storage backend {backend!r}")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test marked `postgres` is skipped (or fails under CI) before its fixtures
    run, even if it reaches the server some other way than our fixtures."""
    if item.get_closest_marker("postgres") is not None:
        require_postgres()


def _skipped_for_postgres(terminalreporter: pytest.TerminalReporter) -> int:
    count = 0
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = getattr(report, "longrepr", None)
        if isinstance(longrepr, tuple) and SKIP_REASON in str(longrepr[-1]):
            count += 1
    return count


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line, so a local `make test` says that PostgreSQL tests did not run."""
    count = _skipped_for_postgres(terminalreporter)
    if count:
        noun = "test" if count == 1 else "tests"
        terminalreporter.write_line(
            f"{count} PostgreSQL {noun} skipped: PostgreSQL not installed "
            "(apt-get install postgresql); CI runs these",
            yellow=True,
            bold=True,
        )
