"""External programs some tests need: PostgreSQL's server (tests/postgres.py)
and Debian's chromium (tests/web/conftest.py).

When one is missing, the tests that need it are skipped locally and the run
ends with one summary line saying how many and how to install it; under CI
(the `CI` environment variable set, as CI services do) the same absence fails
them, so CI can never silently stop running them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest

__all__ = ["External", "in_ci"]


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@dataclass(frozen=True, slots=True)
class External:
    """One program the tests of a marker need, and what is said when it is missing."""

    skip_reason: str  # each skip's reason, and how the summary counts them
    ci_failure: str  # the failure under CI
    summary: str  # the summary line, with {count} and {tests} ("test" or "tests")

    def require(self, found: bool) -> None:
        """Nothing when `found`; else skip the test (locally) or fail it (under CI)."""
        if found:
            return
        if in_ci():
            pytest.fail(self.ci_failure, pytrace=False)
        pytest.skip(self.skip_reason)

    def skipped(self, terminalreporter: pytest.TerminalReporter) -> int:
        count = 0
        for report in terminalreporter.stats.get("skipped", []):
            longrepr = getattr(report, "longrepr", None)
            if isinstance(longrepr, tuple) and self.skip_reason in str(longrepr[-1]):
                count += 1
        return count

    def report(self, terminalreporter: pytest.TerminalReporter) -> None:
        """The summary line, when tests were skipped for this program."""
        count = self.skipped(terminalreporter)
        if count:
            line = self.summary.format(count=count, tests="test" if count == 1 else "tests")
            terminalreporter.write_line(line, yellow=True, bold=True)
