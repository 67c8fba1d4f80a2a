"""Headless Chromium for the web UI tests: Debian's `chromium` driven by
Playwright (never `playwright install`: no browser is downloaded). Every test
gets a fresh profile. Screenshots go to test-artifacts/ (git-ignored).

Without chromium the `browser` tests are skipped locally, with one summary
line, and fail under CI (tests/web/conftest.py, tests/external.py).
`PICOBOT_TEST_CHROMIUM` names another chromium binary (a path that does not
exist exercises the skip on a machine that has one).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from playwright.async_api import Browser, BrowserContext, Page, async_playwright

from tests.external import External

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "web"
DOCS_SHOTS = ROOT / "docs" / "webui"  # the screenshots docs/WEBUI.md shows
CHROMIUM = (
    os.environ.get("PICOBOT_TEST_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
)
BROWSER = External(
    skip_reason="chromium not found (apt-get install -y chromium); CI runs these",
    ci_failure="chromium not found, and under CI the browser tests must run "
    "(.ci/run installs Debian's chromium)",
    summary="chromium not found: {count} browser {tests} skipped; apt-get install -y chromium",
)
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 800}


def require_chromium() -> None:
    """Skip the test without chromium (locally), or fail it (under CI)."""
    BROWSER.require(Path(CHROMIUM).exists())


@asynccontextmanager
async def chromium() -> AsyncIterator[Browser]:
    require_chromium()
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        try:
            yield browser
        finally:
            await browser.close()


@asynccontextmanager
async def page_on(
    browser: Browser,
    *,
    viewport: dict[str, int] = DESKTOP,
    errors: list[str] | None = None,
    locale: str | None = None,
) -> AsyncIterator[Page]:
    """A page in a fresh context (its own localStorage; the browser's
    language `locale`, else chromium's); page errors and console errors are
    appended to `errors`."""
    context: BrowserContext = await browser.new_context(viewport=viewport, locale=locale)  # type: ignore[arg-type]
    page = await context.new_page()
    if errors is not None:
        page.on("pageerror", lambda exc: errors.append(f"pageerror: {exc}"))
        page.on(
            "console",
            lambda msg: (
                errors.append(f"console: {msg.text} [{msg.location.get('url', '')}]")
                if msg.type == "error"
                else None
            ),
        )
    try:
        yield page
    finally:
        await context.close()


async def screenshot(page: Page, name: str, *, docs: bool = False) -> Path:
    """The page as test-artifacts/web/<name>.png; a `docs` one also goes to
    docs/webui/ when PICOBOT_DOCS_SCREENSHOTS=1 (`make screenshots`)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    await page.screenshot(path=str(path), full_page=False)
    if docs and os.environ.get("PICOBOT_DOCS_SCREENSHOTS") == "1":
        DOCS_SHOTS.mkdir(parents=True, exist_ok=True)
        (DOCS_SHOTS / path.name).write_bytes(path.read_bytes())
    return path
