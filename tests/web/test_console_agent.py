"""The console's agent view in headless Chromium against the real gateway:
the MCP servers, skills and scheduled jobs shown are what the manager, the
skill runtime and the database hold; a job paused, resumed and deleted and a
skill disabled and enabled from the page change the database and the
skill-state file; a real MCP server that stops shows down without a reload;
on a desktop and a phone, in English and in Chinese."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from playwright.async_api import Page, expect

from gateway.app import Gateway
from tests.e2e.test_console_agent import CONFIG_JOB, RUNTIME_JOB
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.recording_channel import RecordingChannel
from tests.mcp_servers.harness import HttpMcpServer, stdio_server
from tests.skills.helpers import write_skill
from tests.support import make_config, running_gateway
from tests.web.browser import DESKTOP, PHONE, chromium, page_on, screenshot

pytestmark = pytest.mark.browser
expect.set_options(timeout=15_000)

TOKEN = "console-agent-browser-token-4c2d"
TEXTS = {
    "en": {"up": "up", "paused": "paused", "scheduled": "scheduled", "loaded": "loaded"},
    "zh-CN": {"up": "在线", "paused": "已暂停", "scheduled": "已排期", "loaded": "已加载"},
}


async def _paused(gw: Gateway) -> dict[str, bool]:
    assert gw.store is not None
    return {job.id: job.paused for job, _ in await gw.store.scheduled_jobs()}


async def _shows_what_is_held(page: Page, gw: Gateway, texts: dict[str, str]) -> None:
    assert gw.mcp is not None
    assert gw.skills is not None
    web = page.locator("#mcp .server[data-server='web']")
    await expect(web).to_have_attribute("data-state", "up")
    await expect(web.locator(".state")).to_have_text(texts["up"])
    for tool in gw.mcp.servers["web"].tools:
        await expect(web.locator(".tool-list")).to_contain_text(f"mcp_web_{tool.name}")
    await expect(page.locator("#mcp .server[data-server='idle']")).to_have_attribute(
        "data-state", "inactive"
    )

    scan = await gw.skills.current()
    rows = page.locator("#skills tbody tr")
    await expect(rows).to_have_count(len(scan.skills) + len(scan.disabled))
    shown = [await rows.nth(i).get_attribute("data-skill") for i in range(await rows.count())]
    assert shown == [*scan.skills, *sorted(scan.disabled)]
    await expect(page.locator("#skills-skipped")).to_contain_text(str(scan.invalid[0].path))

    assert gw.store is not None
    jobs = await gw.store.scheduled_jobs()
    await expect(page.locator("#jobs tbody tr")).to_have_count(len(jobs))
    for job, _ in jobs:
        await expect(page.locator("#jobs tbody")).to_contain_text(job.id)


async def _job_button(page: Page, job_id: str, action: str) -> None:
    row = page.locator("#jobs tbody tr", has_text=job_id)
    await row.locator(f"button[data-action='{action}']").click()


async def test_the_agent_view_shows_and_changes_what_the_gateway_holds(
    home: Path, llm: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "user-home"))  # no real ~/.agents skills
    write_skill(home / "skills", "demo", "Demo things.", "Demo body.")
    write_skill(home / "skills", "broken", None)  # skipped: no description
    errors: list[str] = []
    async with HttpMcpServer(TOKEN) as mcp_server:
        servers = {
            "web": mcp_server.entry(
                headers={"Authorization": f"Bearer {TOKEN}"}, ping_interval_secs=1
            ),
            "idle": {**stdio_server(), "isActive": False},
        }
        loaded = make_config(
            home,
            llm.base_url,
            mcpServers=servers,
            tools={"disabled": ["mcp_web_crash"]},
            scheduler={"tick_resolution_ms": 10, "jobs": [CONFIG_JOB]},
        )
        channel = RecordingChannel()
        async with running_gateway(loaded, extra_channels=[channel]) as gw, chromium() as browser:
            assert gw.scheduler is not None
            assert gw.mcp is not None
            made = await gw.scheduler.manage(
                "put", {"job": RUNTIME_JOB}, channel="websocket", sender_id="alice", admin=False
            )
            assert made["ok"], made
            web = gw.mcp.servers["web"]
            await gw.mcp.wait_until(lambda: str(web.state) == "up")
            job = RUNTIME_JOB["id"]

            # a desktop in English: pause the job, disable the skill
            async with page_on(browser, viewport=DESKTOP, errors=errors) as page:
                texts = TEXTS["en"]
                await page.goto(gw.base_url + "/ops/agent")
                await page.select_option("#lang", "en")
                await _shows_what_is_held(page, gw, texts)
                await screenshot(page, "console-agent-desktop-en", docs=True)
                await _job_button(page, job, "pause")
                row = page.locator("#jobs tbody tr", has_text=job)
                await expect(row).to_contain_text(texts["paused"])
                assert (await _paused(gw))[job] is True
                await page.locator("#skills tr[data-skill='demo'] button").click()
                await expect(page.locator("#skills tr[data-skill='demo'].off")).to_be_visible()
                state = json.loads((home / "skill-state.json").read_text())
                assert state["disabled_skills"] == ["demo"]
                await _shows_what_is_held(page, gw, texts)
                width = await page.evaluate("document.documentElement.scrollWidth")
                assert width <= DESKTOP["width"]

            # a phone in Chinese: resume, enable, delete; the server stops
            async with page_on(browser, viewport=PHONE, errors=errors) as page:
                texts = TEXTS["zh-CN"]
                await page.goto(gw.base_url + "/ops/agent")
                await page.select_option("#lang", "zh-CN")
                await _shows_what_is_held(page, gw, texts)
                await _job_button(page, job, "resume")
                row = page.locator("#jobs tbody tr", has_text=job)
                await expect(row).to_contain_text(texts["scheduled"])
                assert (await _paused(gw))[job] is False
                await page.locator("#skills tr[data-skill='demo'] button").click()
                await expect(page.locator("#skills tr[data-skill='demo']")).to_contain_text(
                    texts["loaded"]
                )
                assert json.loads((home / "skill-state.json").read_text())["disabled_skills"] == []

                await _job_button(page, "cfg.hello", "run")
                await channel.wait_sent(1)  # run now ran it
                config_row = page.locator("#jobs tbody tr", has_text="cfg.hello")
                await expect(config_row.locator("button[data-action='run']")).to_be_visible()
                await expect(config_row.locator("button[data-action='delete']")).to_have_count(0)
                await _job_button(page, job, "delete")
                await page.locator("dialog.ask button.danger").click()
                await expect(page.locator("#jobs tbody tr", has_text=job)).to_have_count(0)
                assert job not in await _paused(gw)

                await mcp_server.kill()  # shown down by the panel's own refresh
                card = page.locator("#mcp .server[data-server='web']")
                await expect(card).not_to_have_attribute("data-state", "up")
                await expect(card.locator(".error")).to_contain_text("最近错误")
                await page.evaluate(
                    "for (const n of [document.scrollingElement, ...document.querySelectorAll('main, #ops-view')]) n.scrollTop = 0"
                )
                await screenshot(page, "console-agent-phone-zh", docs=True)
                width = await page.evaluate("document.documentElement.scrollWidth")
                assert width <= PHONE["width"]
    assert errors == []
