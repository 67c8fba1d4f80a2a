"""The console's people view in headless Chromium against the real gateway:
a held tool call appears and is approved from the page (the turn finishes
in its chat, the decision is in the database), pairings are listed, and a
memory search shows the stored entries and a delete removes one; on a
desktop and a phone, in English and in Chinese."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from playwright.async_api import Page, expect

from gateway.access.pairing import CODE_RULES
from gateway.app import Gateway
from storage.sql.memory.memories import Provenance, Scope
from storage.store import Store
from tests.e2e.test_approvals import approval_config, next_text
from tests.fakes.openai_server import FakeOpenAI
from tests.support import WsClient, running_gateway, ws_client
from tests.web.browser import DESKTOP, PHONE, chromium, page_on, screenshot

pytestmark = pytest.mark.browser
expect.set_options(timeout=15_000)

ALICE = Scope("user", "websocket:alice")
SOURCE = Provenance("agent")
# (viewport, language, its texts, the screenshot) for each round
ROUNDS = [
    (DESKTOP, "en", {"title": "Waiting for approval", "none": "no tool call"}, "desktop-en"),
    (PHONE, "zh-CN", {"title": "等待批准", "none": "没有等待批准"}, "phone-zh"),
]


def store_of(gw: Gateway) -> Store:
    assert gw.store is not None
    return gw.store


async def _pairings(store: Store) -> None:
    """A paired sender and a pending code, written as the gateway writes them."""
    now = datetime.now(UTC)
    paired = await store.issue_pairing_code(
        "telegram", "42", "42", lambda: "HJKM-ED42", now, CODE_RULES
    )
    assert paired.pairing is not None
    await store.approve_pairing(paired.pairing.code, "telegram:1", now, None)
    await store.issue_pairing_code("telegram", "77", "77", lambda: "WAIT-7777", now, CODE_RULES)


async def _search_and_delete(page: Page, gw: Gateway, query: str, key: str) -> None:
    memories = store_of(gw).memories
    await expect(page.locator("#memory-user")).to_have_value(ALICE.key)  # the only user
    await page.fill("#memory-search", query)
    await page.press("#memory-search", "Enter")
    await expect(page.locator("#memory-shown")).to_contain_text(query)
    expected = await memories.search(ALICE, query, None, 50)
    rows = page.locator("#memories tbody tr")
    await expect(rows).to_have_count(len(expected))
    names = [await rows.nth(i).locator(".entry .id").inner_text() for i in range(len(expected))]
    assert names == [f"{r.namespace}/{r.memory_key}" for r in expected]
    stored = await memories.get(ALICE, "preferences", key)
    assert stored is not None
    await expect(page.locator("#memories")).to_contain_text(stored.content)
    await page.locator(f"#memories button[data-entry='preferences/{key}']").click()
    await page.locator("dialog.ask button.danger").click()
    await expect(page.locator(f"#memories button[data-entry='preferences/{key}']")).to_have_count(0)
    await expect(page.locator("#people-note")).to_contain_text(f"preferences/{key}")
    assert await memories.get(ALICE, "preferences", key) is None


async def test_an_approval_and_a_memory_are_handled_from_the_page(
    home: Path, llm: FakeOpenAI
) -> None:
    errors: list[str] = []
    marks = [("touch one.txt", "First done."), ("touch two.txt", "Second done.")]
    for mark, reply in marks:
        llm.add_tool_call("bash", {"command": mark})
        llm.add_text(reply)
    async with (
        running_gateway(approval_config(home, llm)) as gw,
        ws_client(gw) as client,
        chromium() as browser,
    ):
        store = store_of(gw)
        await _pairings(store)
        entries = [
            ("coffee", "Drinks oat milk flat white, never sugar"),
            ("tea", "喜欢喝普洱茶，不喝咖啡"),
            ("editor", "Uses Neovim with a Lua configuration"),
        ]
        for key, content in entries:
            await store.memories.put(ALICE, "preferences", key, content, SOURCE, cap=None)
        searches = [("flat white", "coffee"), ("普洱茶", "tea")]
        for (viewport, lang, texts, shot), (mark, reply), (query, key) in zip(
            ROUNDS, marks, searches, strict=True
        ):
            async with page_on(browser, viewport=viewport, errors=errors) as page:
                await page.goto(gw.base_url + "/ops/people")
                await page.select_option("#lang", lang)
                await expect(page.locator("#paired")).to_contain_text("telegram:42")
                await expect(page.locator("#pairing-codes")).to_contain_text("WAIT-7777")
                await client.send(f"run {mark}")
                assert mark in await next_text(client)
                await page.locator("#ops-refresh").click()
                await expect(page.locator("#approvals")).to_contain_text(mark)
                await expect(page.locator(".view-people h2").first).to_contain_text(texts["title"])
                await screenshot(page, f"console-people-{shot}", docs=True)
                await _approve(page, gw, client, reply, texts)
                await _search_and_delete(page, gw, query, key)
                width = await page.evaluate("document.documentElement.scrollWidth")
                assert width <= viewport["width"], (shot, width)
    assert errors == []
    assert (home / "workspace" / "one.txt").exists()
    assert (home / "workspace" / "two.txt").exists()


async def _approve(
    page: Page, gw: Gateway, client: WsClient, reply: str, texts: dict[str, str]
) -> None:
    [waiting] = [r for r in await store_of(gw).approvals.open() if r.state.value == "pending"]
    await page.locator(f"#approvals [data-approval-id='{waiting.id}'] button.approve").click()
    assert await next_text(client) == reply  # the turn finished
    await expect(page.locator("#approvals .empty")).to_contain_text(texts["none"])
    decided = await store_of(gw).approvals.get(waiting.id)
    assert decided is not None
    assert (decided.approved, decided.decided_by) == (True, "console:operator")
