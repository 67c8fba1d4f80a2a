"""The console's conversations view in headless Chromium against the real
gateway after a scripted run (tests/e2e/test_console_conversations.py): the
list and a transcript show what the database holds, a tool call folded with
its result, a sub-agent's transcript inside its call, the compaction marked;
an archive asks first (cancelled: nothing changes) and a delete too; on a
desktop and a phone, in English and in Chinese."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Page, expect

from gateway.app import Gateway
from tests.e2e.test_console_conversations import (
    ALPHA_ASKED,
    CHILD,
    _config,
    _rows,
    _scripted_run,
    _summarise,
)
from tests.fakes.openai_server import FakeOpenAI
from tests.support import running_gateway
from tests.web.browser import DESKTOP, PHONE, chromium, page_on, screenshot

pytestmark = pytest.mark.browser
expect.set_options(timeout=15_000)

# (viewport, language, its texts, the screenshot, the action and its session)
ROUNDS = [
    (DESKTOP, "en", {"title": "Conversations", "compaction": "History compacted here"},
     "desktop-en", "archive", "beta"),
    (PHONE, "zh-CN", {"title": "对话记录", "compaction": "历史在此处压缩"},
     "phone-zh", "delete", "beta"),
]  # fmt: skip


async def _listed(gw: Gateway) -> list[tuple[Any, ...]]:
    return await _rows(
        gw,
        "SELECT id, (SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id "
        "AND m.segment = s.segment) FROM sessions s WHERE channel != 'subagent' "
        "ORDER BY updated_at DESC, id",
    )


async def _check_list(page: Page, gw: Gateway) -> None:
    stored = await _listed(gw)
    rows = page.locator("#conversations tbody tr")
    await expect(rows).to_have_count(len(stored))
    for n, (session, count) in enumerate(stored):
        await expect(rows.nth(n)).to_have_attribute("data-session", session)
        await expect(rows.nth(n).locator("td").nth(4)).to_have_text(str(count))


async def _check_transcript(page: Page, gw: Gateway, texts: dict[str, str]) -> None:
    await page.locator("#conversations button[data-session='alpha']").click()
    log = page.locator("#transcript")
    users = log.locator(".entry.user .msg .text")
    stored = [r[0] for r in await _rows(
        gw, "SELECT content FROM messages WHERE session_id = 'alpha' AND role = 'user' ORDER BY seq"
    )]  # fmt: skip
    assert list(dict.fromkeys(stored)) == ALPHA_ASKED  # the compaction's copy is shown once
    await expect(users).to_have_text(ALPHA_ASKED)

    # the calculator call, folded, with the result the database holds
    [(result,)] = await _rows(
        gw, "SELECT content FROM messages WHERE session_id = 'alpha' AND tool_call_id = 'call-calc'"
    )
    calc = log.locator("details.tool[data-call-id='call-calc']")
    await expect(calc).to_have_count(1)
    await expect(calc).to_have_js_property("open", False)
    await expect(calc.locator("summary")).to_contain_text("calculator")
    await expect(calc.locator(".result")).to_have_text(result)

    # the compaction, marked where it happened, with the summary stored
    [(summary,)] = await _rows(
        gw,
        "SELECT content FROM messages WHERE session_id = 'alpha' AND marker = ?",
        "SYSTEM_CONTEXT_HISTORY_COMPACTION",
    )
    mark = log.locator(".compaction")
    await expect(mark).to_have_count(1)
    await expect(mark.locator("summary")).to_contain_text(texts["compaction"])
    await expect(mark.locator("pre")).to_have_text(summary)
    after = log.locator(".compaction ~ .entry.user .msg .text")
    await expect(after).to_have_text([ALPHA_ASKED[3]])

    # the sub-agent's transcript inside the call that ran it, read when opened
    task = log.locator("details.tool[data-call-id='call-sub']")
    await task.locator("summary").first.click()
    await task.locator(f"details.subagent[data-session='{CHILD}'] > summary").click()
    [(answer,)] = await _rows(
        gw,
        "SELECT content FROM messages WHERE session_id = ? AND role = 'assistant' "
        "ORDER BY seq DESC LIMIT 1",
        CHILD,
    )
    await expect(task.locator("details.subagent .entry.assistant .msg").last).to_contain_text(
        answer
    )


async def _act(page: Page, gw: Gateway, action: str, session: str) -> None:
    """Asked first: cancelled, nothing changes; confirmed, the database does."""
    await page.locator(f"#conversations button[data-session='{session}']").click()
    await expect(page.locator("#transcript-facts")).to_contain_text(session)
    before = await _rows(gw, "SELECT id, status FROM sessions WHERE chat_id = ?", session)
    await page.locator(f"#conversation-{action}").click()
    await page.locator("dialog.ask button:not(.danger)").click()
    await expect(page.locator("dialog.ask")).to_have_count(0)
    assert await _rows(gw, "SELECT id, status FROM sessions WHERE chat_id = ?", session) == before
    await page.locator(f"#conversation-{action}").click()
    await page.locator("dialog.ask button.danger").click()
    if action == "archive":
        await expect(page.locator("#conversation-archive")).to_have_count(0)
        assert (session, "archived") in await _rows(
            gw, "SELECT id, status FROM sessions WHERE chat_id = ?", session
        )
    else:
        await expect(page.locator("#transcript")).to_have_count(0)
        assert await _rows(gw, "SELECT id FROM sessions WHERE id = ?", session) == []
    await _check_list(page, gw)


async def test_the_list_and_a_transcript_show_the_database_and_act_on_it(
    home: Path, llm: FakeOpenAI
) -> None:
    llm.responder = _summarise
    errors: list[str] = []
    async with running_gateway(_config(home, llm)) as gw, chromium() as browser:
        await _scripted_run(gw, llm)
        for viewport, lang, texts, shot, action, session in ROUNDS:
            async with page_on(browser, viewport=viewport, errors=errors) as page:
                await page.goto(gw.base_url + "/ops/conversations")
                await page.select_option("#lang", lang)
                await expect(page.locator(".view-conversations h2").first).to_have_text(
                    texts["title"]
                )
                await _check_list(page, gw)
                await screenshot(page, f"console-conversations-{shot}-list")
                await _check_transcript(page, gw, texts)
                # the list and the transcript's start; on a phone, the compaction
                if viewport is PHONE:
                    await page.evaluate(
                        "document.querySelector('.compaction').scrollIntoView({block: 'center'})"
                    )
                else:
                    await page.evaluate("document.getElementById('ops-view').scrollTo(0, 0)")
                await screenshot(page, f"console-conversations-{shot}", docs=True)
                width = await page.evaluate("document.documentElement.scrollWidth")
                assert width <= viewport["width"], (shot, width)
                await _act(page, gw, action, session)
    assert errors == []
