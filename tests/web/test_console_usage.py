"""The console's usage view in headless Chromium: after scripted turns through
two agents (one on a fake Anthropic that reports prompt-cache reads and
writes), the summary, what each SVG chart drew, the breakdown by agent and
by user and the budgets equal what usage_log holds; on a desktop and a
390 px phone (no sideways scrolling), in English and in Chinese.
Screenshots: console-usage-desktop-en, console-usage-phone-zh (docs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Page, expect

from gateway.app import Gateway
from tests.consoles import usage_config
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.prompt_cache import AnthropicCache
from tests.fakes.recording_channel import RecordingChannel
from tests.support import ask_on, running_gateway, wait_until, ws_client
from tests.web.browser import DESKTOP, PHONE, chromium, page_on, screenshot

pytestmark = pytest.mark.browser
expect.set_options(timeout=15_000)

COLUMNS = (
    "agent",
    "sender",
    "run_id",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cost",
)


async def _logged(gw: Gateway) -> list[dict[str, Any]]:
    assert gw.store is not None
    rows = await gw.store.db.read(
        lambda c: c.execute(
            "SELECT agent, channel || ':' || sender_id, run_id, input_tokens, output_tokens, "
            "cache_read_tokens, cache_write_tokens, cost FROM usage_log"
        ).fetchall()
    )
    return [dict(zip(COLUMNS, r, strict=True)) for r in rows]


async def _number(page: Page, selector: str, attribute: str) -> float:
    value = await page.locator(selector).get_attribute(attribute)
    assert value is not None, (selector, attribute)
    return float(value)


async def _check_page(page: Page, rows: list[dict[str, Any]], chinese: bool) -> None:
    """What the page shows against the stored per-call usage."""
    title = "用量与费用" if chinese else "Usage and cost"
    await expect(page.locator(".view-usage h2").first).to_have_text(title)
    summary = "#usage-summary"

    def total(name: str) -> float:
        return float(sum(r[name] or 0 for r in rows))

    for attribute, name in [
        ("data-input", "input_tokens"),
        ("data-output", "output_tokens"),
        ("data-cache-read", "cache_read_tokens"),
        ("data-cache-write", "cache_write_tokens"),
    ]:
        assert await _number(page, summary, attribute) == total(name)
    turns = len({r["run_id"] for r in rows})
    assert await _number(page, summary, "data-turns") == turns
    assert await _number(page, summary, "data-calls") == len(rows)
    assert abs(await _number(page, summary, "data-cost") - total("cost")) < 1e-9
    share = f"{round(100 * total('cache_read_tokens') / total('input_tokens'), 1):g}%"
    await expect(page.locator(summary)).to_contain_text(share)
    tokens = int(total("input_tokens") + total("output_tokens"))
    await expect(page.locator(summary)).to_contain_text(f"{tokens:,}")

    # what the charts drew: every token, cost and turn of the log
    chart = "#usage-tokens-chart"
    drawn = [
        await _number(page, chart, f"data-total-{kind}")
        for kind in ("uncached", "cache-read", "cache-write", "output")
    ]
    assert sum(drawn[:3]) == total("input_tokens")
    assert drawn[1:] == [total(n) for n in ("cache_read_tokens", "cache_write_tokens")] + [
        total("output_tokens")
    ]
    assert await page.locator(f"{chart} rect").count() >= 4  # today's bar, four parts
    assert abs(await _number(page, "#usage-cost-chart", "data-total") - total("cost")) < 1e-9
    assert await _number(page, "#usage-turns-chart", "data-total") == turns

    # the breakdown by agent, then by user
    for dimension, column in [("agent", "agent"), ("user", "sender")]:
        await page.select_option("#usage-dimension", dimension)
        grid = page.locator(f"#usage-breakdown[data-dimension='{dimension}']")
        await expect(grid).to_be_visible()
        keys = await grid.locator("tbody td:first-child .id").evaluate_all(
            "nodes => nodes.map(n => n.dataset.key)"
        )
        assert sorted(keys) == sorted({r[column] for r in rows})
    budgets = page.locator("#usage-budgets tbody tr")
    alice = budgets.filter(has_text="rec:alice")
    spent = sum(r["input_tokens"] + r["output_tokens"] for r in rows if r["sender"] == "rec:alice")
    await expect(alice).to_contain_text(f"{spent:,}")
    await expect(budgets.first).to_contain_text("每位发送者" if chinese else "every sender")


async def test_the_usage_view_shows_what_the_usage_log_holds(home: Path, llm: FakeOpenAI) -> None:
    async with FakeAnthropic(prompt_cache=AnthropicCache(min_tokens=1)) as claude:
        loaded = usage_config(
            home,
            llm.base_url,
            claude.base_url,
            {
                "sender": {"daily_tokens": 200_000},
                "users": {"rec:alice": {"daily_tokens": 20_000}},
                "total": {"monthly_cost": 2},
            },
        )
        for _ in range(2):
            claude.add_text("An answer from the cache.")
        for usage in [(1200, 80), (900, 40), (700, 30)]:
            llm.add_text("sure", usage=usage)
        channel = RecordingChannel()
        errors: list[str] = []
        async with running_gateway(loaded, extra_channels=[channel]) as gw, chromium() as browser:
            await ask_on(channel, "alice", "hello", sender_id="alice")
            await ask_on(channel, "alice", "and again", sender_id="alice")
            await ask_on(channel, "bob", "hi", sender_id="bob")
            async with ws_client(gw) as client:
                await client.ask("first", timeout=60)  # the first loads the SDK
                await client.ask("second")
            await wait_until(lambda: _calls(gw, 5))
            rows = await _logged(gw)
            assert sum(r["cache_read_tokens"] for r in rows) > 0

            for viewport, name in [(DESKTOP, "desktop"), (PHONE, "phone")]:
                async with page_on(browser, viewport=viewport, errors=errors) as page:
                    await page.goto(gw.base_url + "/ops/usage")
                    await page.select_option("#lang", "en")
                    await _check_page(page, rows, chinese=False)
                    await page.select_option("#usage-dimension", "agent")
                    await page.locator("#usage-dimension").blur()
                    if name == "desktop":
                        await screenshot(page, "console-usage-desktop-en", docs=True)
                    await page.select_option("#lang", "zh-CN")
                    await _check_page(page, rows, chinese=True)
                    await page.select_option("#usage-dimension", "agent")
                    await page.locator("#usage-dimension").blur()
                    if name == "phone":
                        await screenshot(page, "console-usage-phone-zh", docs=True)
                    sideways = await page.evaluate(
                        "() => [document.documentElement, document.querySelector('.ops')]"
                        ".some(n => n.scrollWidth > n.clientWidth + 1)"
                    )
                    assert not sideways, name
    assert errors == []


async def _calls(gw: Gateway, count: int) -> bool:
    return len(await _logged(gw)) >= count
