"""The `browser` marker: a test that drives the web UI in chromium is skipped
before its fixtures run when chromium is missing (locally; under CI it fails),
and the run ends with one line saying how many were skipped."""

from __future__ import annotations

import pytest

from tests.web.browser import BROWSER, require_chromium


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("browser") is not None:
        require_chromium()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    BROWSER.report(terminalreporter)
