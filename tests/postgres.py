"""A throwaway PostgreSQL cluster for the test suite (issue 53).

The cluster is started lazily, the first time a test asks for `postgres_server`
(directly, or through `postgres_url` / `storage_url`), so a run that needs no
PostgreSQL never pays for `initdb`. It lives in a fresh temporary directory,
listens on 127.0.0.1 only, on a free port, and is stopped and deleted at the end
of the session. Each test gets its own empty database (`CREATE DATABASE`). The
cluster itself is tests/pgcluster.py's (shared with the bench), with fsync off.

Without PostgreSQL binaries the tests that need them are skipped locally, and the
summary says how many; under CI (the `CI` environment variable set) the same
absence is an error, so CI can never silently stop running them (tests/external.py,
shared with the browser tests).

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
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import pgcluster
from tests.external import External
from tests.pgcluster import PostgresServer, running_cluster

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
POSTGRES = External(
    skip_reason=SKIP_REASON,
    ci_failure="PostgreSQL not installed, and under CI the PostgreSQL tests must run "
    "(.ci/run installs Debian's postgresql)",
    summary="{count} PostgreSQL {tests} skipped: PostgreSQL not installed "
    "(apt-get install postgresql); CI runs these",
)

storage_backends = pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)


# --- discovery --------------------------------------------------------------------------


@functools.cache  # asked once per marked test; the answer cannot change in a run
def find_bindir() -> Path | None:
    """tests.pgcluster.find_bindir, once per run."""
    return pgcluster.find_bindir()


def require_postgres() -> Path:
    """The binaries' directory, or skip the test (locally) / fail it (under CI)."""
    bindir = find_bindir()
    POSTGRES.require(bindir is not None)
    assert bindir is not None
    return bindir


# --- fixtures and hooks -----------------------------------------------------------------


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """The session's cluster, started on first use (skipped or failed without binaries)."""
    with running_cluster(require_postgres()) as server:
        yield server


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


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line, so a local `make test` says that PostgreSQL tests did not run."""
    POSTGRES.report(terminalreporter)
