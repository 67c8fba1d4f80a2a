"""Headless Chromium for the web UI tests: Debian's `chromium` driven by
Playwright (never `playwright install`: no browser is downloaded). Every test
gets a fresh profile. Screenshots go to test-artifacts/ (git-ignored)."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from playwright.async_api import Browser, BrowserContext, Page, async_playwright

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "web"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
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


@asynccontextmanager
async def chromium() -> AsyncIterator[Browser]:
    if not Path(CHROMIUM).exists():
        raise RuntimeError("the browser tests need Debian's chromium: apt-get install -y chromium")
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        try:
            yield browser
        finally:
            await browser.close()


@asynccontextmanager
async def page_on(
    browser: Browser, *, viewport: dict[str, int] = DESKTOP, errors: list[str] | None = None
) -> AsyncIterator[Page]:
    """A page in a fresh context (its own localStorage); page errors and
    console errors are appended to `errors`."""
    context: BrowserContext = await browser.new_context(viewport=viewport)  # type: ignore[arg-type]
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


async def screenshot(page: Page, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    await page.screenshot(path=str(path), full_page=False)
    return path
