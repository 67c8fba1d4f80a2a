"""The console's Logs and Configuration views in headless Chromium against a
whole gateway whose log is set up as `picobot gateway` sets it up (JSON
lines, the config's secrets registered): a chat turn's log line appears in
the live tail, the text and level filters hide and show it, a provider
failure that echoes the planted api key shows it masked, the list follows
the newest line unless scrolled up, pause and resume; the configuration
shows the planted secrets masked and the doctor's findings (and probes).
Desktop in English, a phone in Chinese. Screenshots: console-logs-*,
console-config-* (docs/webui/ with PICOBOT_DOCS_SCREENSHOTS=1)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import structlog
from playwright.async_api import Page, expect

from gateway.app import Gateway
from gateway.ops.logging import clear_secrets, configure_logging, register_secrets
from gateway.ops.tail import LOG_TAIL
from tests.fakes.openai_server import FakeOpenAI, openai_error_body
from tests.support import logging_restored, make_config, running_gateway, wait_until, ws_client
from tests.web.browser import DESKTOP, PHONE, chromium, page_on, screenshot

pytestmark = pytest.mark.browser
expect.set_options(timeout=15_000)

API_KEY = "planted-browser-key-c81f0e"
TELEGRAM_TOKEN = "123456789:AAplantedBrowserTelegramToken0123456"
MCP_SECRET = "planted-mcp-env-4a7d"
SECRETS = (API_KEY, TELEGRAM_TOKEN, MCP_SECRET)
TEXTS = {
    "en": {
        "live": "live",
        "paused": "paused",
        "resume": "Resume",
        "config": "Configuration in effect",
    },
    "zh-CN": {"live": "实时", "paused": "已暂停", "resume": "继续", "config": "当前生效的配置"},
}


@pytest.fixture
def logged() -> Iterator[None]:
    with logging_restored():
        configure_logging("info", "json", stream=io.StringIO())
        register_secrets(SECRETS)  # as `picobot gateway` registers the config's
        yield
    clear_secrets()


async def _no_secret_shown(page: Page) -> None:
    html = await page.content()
    for secret in SECRETS:
        assert secret not in html


def viewport_is_phone(page: Page) -> bool:
    return page.viewport_size == PHONE


async def _fits(page: Page) -> None:
    assert await page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


async def _logs(page: Page, gw: Gateway, llm: FakeOpenAI, lang: str, shot: str) -> None:
    words = TEXTS[lang]
    chat = f"browser-tail-{shot}"
    lines = page.locator("#log-lines li.line")
    await expect(page.locator("#log-state")).to_contain_text(words["live"])

    # a chat turn's line arrives by itself
    async with ws_client(gw, chat) as client:
        assert await client.ask("hello from the test") == "echo: hello from the test"
        llm.add_error(400, openai_error_body(400, f"the proxy refused the key {API_KEY}"))
        await client.ask("this one fails")
    done = lines.filter(has_text=chat).filter(has_text="turn_done")
    failed = lines.filter(has_text=chat).filter(has_text="turn_failed_provider")
    await expect(done.first).to_be_visible()
    await expect(failed).to_have_count(1)
    await expect(failed).to_contain_text("the proxy refused the key ***")
    await expect(failed).to_have_attribute("data-level", "error")
    await _no_secret_shown(page)

    # the text filter keeps only its lines, then none, then all again
    await page.fill("#log-filter", chat)
    await expect(lines.filter(has_not_text=chat)).to_have_count(0)
    await expect(done.first).to_be_visible()
    await page.fill("#log-filter", "no-such-text-4411")
    await expect(lines).to_have_count(0)
    await expect(page.locator("#log-lines li.empty")).to_be_visible()
    await page.fill("#log-filter", "")
    await expect(done.first).to_be_visible()

    # the level filter: errors only hides the turn's info line, not its failure
    await page.select_option("#log-level", "error")
    await expect(done).to_have_count(0)
    await expect(failed).to_have_count(1)
    await expect(lines.filter(has_not_text="error")).to_have_count(0)
    await page.select_option("#log-level", "debug")
    await expect(done.first).to_be_visible()

    # the list follows the newest line...
    log = structlog.get_logger("picobot.test")
    for i in range(120):
        log.info("filler_line", round=shot, i=i)
    await expect(lines.filter(has_text=f"round={shot}").last).to_contain_text("i=119")
    await expect(lines.last).to_be_in_viewport()
    # ...but not once the reader scrolled up: a button goes down
    await page.evaluate("document.querySelector('.log-scroll').scrollTop = 0")
    log.info("marker_while_up", round=shot)
    await expect(page.locator("#log-newer")).to_be_visible()
    assert await page.evaluate("document.querySelector('.log-scroll').scrollTop") == 0
    await page.click("#log-newer")
    await expect(lines.filter(has_text="marker_while_up").last).to_be_in_viewport()

    # pause and resume
    await page.click("#log-pause")
    await expect(page.locator("#log-pause")).to_have_text(words["resume"])
    await expect(page.locator("#log-state")).to_contain_text(words["paused"])
    log.info("marker_after_pause", round=shot)
    await wait_until(lambda: LOG_TAIL.read(text="marker_after_pause").events)
    await page.click("#log-pause")
    await expect(lines.filter(has_text="marker_after_pause").last).to_be_visible()

    await page.fill("#log-filter", chat)  # the turn's lines for the picture
    await expect(lines.filter(has_not_text=chat)).to_have_count(0)
    await _no_secret_shown(page)
    await _fits(page)
    await screenshot(page, f"console-logs-{shot}", docs=True)
    await page.fill("#log-filter", "")


async def _config(page: Page, gw: Gateway, lang: str, shot: str, *, probe: bool) -> None:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{gw.base_url}/api/ops/doctor") as response,
    ):
        doctor: dict[str, Any] = await response.json()
    await page.click("#console-tabs a.tab[data-view=config]")
    await expect(page.locator(".view-config h2").last).to_have_text(TEXTS[lang]["config"])
    findings = page.locator("#findings li.finding")
    await expect(findings).to_have_count(len(doctor["findings"]))
    for index, finding in enumerate(doctor["findings"]):
        item = findings.nth(index)
        await expect(item).to_have_attribute("data-check", finding["check"])
        await expect(item).to_have_attribute("data-status", finding["status"])
        await expect(item.locator(".message")).to_have_text(finding["message"])
    summary = page.locator("#doctor-summary")
    await expect(summary).to_have_attribute("data-warnings", str(doctor["warnings"]))
    await expect(summary).to_have_attribute("data-problems", str(doctor["problems"]))

    await page.click("#config-expand")
    providers = page.locator("#config-sections details[data-section=providers] pre")
    await expect(providers).to_be_visible()
    await expect(providers).to_contain_text('"api_key": "***"')
    await expect(
        page.locator("#config-sections details[data-section=channels] pre")
    ).to_contain_text('"token": "***"')
    servers = page.locator("#config-sections details[data-section=mcpServers] pre")
    await expect(servers).to_contain_text('"DB_OPTS": "***"')
    await expect(servers).to_contain_text('"command": "db-mcp"')
    await _no_secret_shown(page)
    await _fits(page)
    await page.locator("#config-expand").click()  # closed again; the picture: providers open
    await page.click("#config-sections details[data-section=providers] summary")
    if viewport_is_phone(page):  # the configuration, below the doctor's findings
        await page.locator(".view-config .panel h2").last.evaluate(
            "node => { node.scrollIntoView(); document.querySelector('#ops-view').scrollTop -= 64; }"
        )
    else:
        await page.evaluate("document.querySelector('#ops-view').scrollTop = 0")
    await screenshot(page, f"console-config-{shot}", docs=True)

    if probe:  # doctor --probe: the fake provider answers
        await page.click("#doctor-probe")
        await expect(page.locator("#findings")).to_have_attribute("data-probed", "true")
        probed = page.locator('#findings li[data-check="probe provider default"]')
        await expect(probed).to_have_attribute("data-status", "ok")
        await _no_secret_shown(page)


async def test_the_live_log_and_the_configuration(
    home: Path, llm: FakeOpenAI, logged: None
) -> None:
    config = make_config(
        home,
        llm.base_url,
        providers={"default": {"api_key": API_KEY}},
        channels={"telegram": {"enabled": False, "token": TELEGRAM_TOKEN}},
        mcpServers={
            "db": {
                "type": "stdio",
                "command": "db-mcp",
                "isActive": False,
                "env": {"DB_OPTS": MCP_SECRET},
            }
        },
    )
    errors: list[str] = []
    async with running_gateway(config) as gw, chromium() as browser:
        for viewport, lang, shot in ((DESKTOP, "en", "desktop-en"), (PHONE, "zh-CN", "phone-zh")):
            async with page_on(browser, viewport=viewport, errors=errors) as page:
                await page.goto(gw.base_url + "/ops/logs")
                if lang != "en":
                    await page.select_option("#lang", lang)
                    await expect(page.locator("#console-tabs a.tab[data-view=logs]")).to_have_text(
                        "日志"
                    )
                await _logs(page, gw, llm, lang, shot)
                await _config(page, gw, lang, shot, probe=lang == "en")
    assert errors == []
