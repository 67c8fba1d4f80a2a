"""The console in the page is for admins: a non-admin's token sees no
console link, and the console's address shows a note instead of views (the
server refuses the data itself: tests/e2e/test_console_access.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.async_api import Browser, Page, expect

from tests.fakes.openai_server import FakeOpenAI
from tests.support import make_config, running_gateway
from tests.web.browser import PHONE, chromium, page_on

pytestmark = pytest.mark.browser
expect.set_options(timeout=15_000)


async def _with_token(browser: Browser, token: str) -> Page:
    context = await browser.new_context()
    await context.add_init_script(f"localStorage.setItem('picobot.token', {token!r})")
    return await context.new_page()


async def test_a_non_admin_sees_no_console_and_an_admin_does(home: Path, llm: FakeOpenAI) -> None:
    config = make_config(
        home,
        llm.base_url,
        gateway={"auth_token": "operator-token", "admins": ["websocket:alice"]},
        channels={"websocket": {"tokens": {"alice": "alice-token", "bob": "bob-token"}}},
    )
    async with running_gateway(config) as gw, chromium() as browser:
        bob = await _with_token(browser, "bob-token")
        await bob.goto(gw.base_url + "/")
        await expect(bob.locator("#conn")).to_have_attribute("data-state", "online")
        await expect(bob.locator("#nav-ops")).to_be_hidden()
        await bob.goto(gw.base_url + "/ops/usage")
        await expect(bob.locator("#ops-error")).to_contain_text("admins only")
        await expect(bob.locator("#console-tabs")).to_be_hidden()
        assert await bob.locator("#ops-view section[data-view]:visible").count() == 0
        await expect(bob.locator("#nav-ops")).to_be_hidden()

        alice = await _with_token(browser, "alice-token")
        await alice.goto(gw.base_url + "/")
        await expect(alice.locator("#conn")).to_have_attribute("data-state", "online")
        await expect(alice.locator("#nav-ops")).to_be_visible()
        await alice.goto(gw.base_url + "/ops/delivery")
        await expect(alice.locator("#console-tabs a.tab")).to_have_count(7)
        await expect(alice.locator("#checks li").first).to_be_visible()
        await expect(alice.locator("#ops-error")).to_be_hidden()
        # on a phone, in English (the longer words), the header and the tabs fit
        await alice.set_viewport_size(PHONE)
        for view in ("usage", "delivery", "logs"):
            await alice.goto(gw.base_url + f"/ops/{view}")
            await expect(alice.locator(f"section[data-view={view}]")).to_be_visible()
            width = await alice.evaluate("() => document.documentElement.scrollWidth")
            assert width <= PHONE["width"], (view, width)

    # a loopback gateway without tokens: whoever reaches it is the operator
    async with (
        running_gateway(make_config(home, llm.base_url)) as gw,
        chromium() as browser,
        page_on(browser) as page,
    ):
        await page.goto(gw.base_url + "/ops/delivery")
        await expect(page.locator("#nav-ops")).to_be_visible()
        await expect(page.locator("#checks li").first).to_be_visible()
