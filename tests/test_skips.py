"""`make test` on a machine without chromium or PostgreSQL: their tests are
skipped with one summary line each, saying how to install them; under CI
(`CI=true`) the same absence fails the run (tests/external.py). Each case runs
pytest in a subprocess on one marked test, with the program made missing."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Case:
    test: str  # one test that needs the program
    missing: dict[str, str]  # the environment that makes it missing
    line: str  # the summary line of a local run


BROWSER = Case(
    "tests/web/test_browser_owners.py::"
    "test_a_saved_chat_is_its_owners_and_another_token_starts_its_own",
    {"PICOBOT_TEST_CHROMIUM": "/nonexistent/chromium"},
    "chromium not found: 1 browser test skipped; apt-get install -y chromium",
)
POSTGRES = Case(
    "tests/test_postgres_cluster.py::test_server_is_recent_and_reachable",
    {"PICOBOT_TEST_NO_POSTGRES": "1"},
    "1 PostgreSQL test skipped: PostgreSQL not installed (apt-get install postgresql); "
    "CI runs these",
)
CASES = pytest.mark.parametrize("case", [BROWSER, POSTGRES], ids=["browser", "postgres"])


def _pytest(case: Case, **env: str) -> subprocess.CompletedProcess[str]:
    # PATH: this virtualenv only, so no chromium or pg_config is found on it
    keep = {k: v for k, v in os.environ.items() if k in ("HOME", "LANG", "TMPDIR")}
    keep |= {"PATH": str(Path(sys.executable).parent), **case.missing, **env}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", case.test],
        cwd=ROOT,
        env=keep,
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )


@CASES
def test_locally_a_missing_program_skips_its_tests_with_one_line(case: Case) -> None:
    run = _pytest(case)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 skipped" in run.stdout
    assert [line for line in run.stdout.splitlines() if line == case.line] == [case.line]


@CASES
def test_under_ci_a_missing_program_fails_the_run(case: Case) -> None:
    run = _pytest(case, CI="true")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "1 error" in run.stdout
    assert "skipped" not in run.stdout
    assert case.line not in run.stdout
