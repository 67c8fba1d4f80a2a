"""The console's delivery view in headless Chromium, on a desktop and a
phone, in English and Chinese: a poison message kept as a dead letter shows
with its secret masked, and a retry from the page records and answers it; a
failed reply is discarded after a confirmation. What the page shows and what
its buttons did are checked against the database."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Page, expect

from gateway.app import Gateway
from gateway.ops.logging import MASK
from tests.consoles import REFUSE_POISON, planted_secret
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.recording_channel import RecordingChannel
from tests.support import make_config, running_gateway, wait_until, ws_client
from tests.web.browser import DESKTOP, PHONE, chromium, page_on, screenshot

pytestmark = pytest.mark.browser
expect.set_options(timeout=15_000)

SECRET = "zq-planted-secret-5f0b3c91"


@pytest.fixture(autouse=True)
def _secret() -> Iterator[str]:
    with planted_secret(SECRET) as secret:
        yield secret


async def _rows(gw: Gateway, sql: str) -> list[tuple[Any, ...]]:
    assert gw.db is not None
    return await gw.db.read(lambda c: [tuple(r) for r in c.execute(sql).fetchall()])


async def _fits(page: Page) -> None:
    """Nothing makes the page scroll sideways."""
    wide = await page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
    assert wide <= 0


async def test_a_dead_letter_is_shown_masked_and_retried_from_the_page(
    home: Path, llm: FakeOpenAI
) -> None:
    rec = RecordingChannel()
    rec.fail_permanently()
    errors: list[str] = []
    async with (
        running_gateway(make_config(home, llm.base_url), extra_channels=[rec]) as gw,
        ws_client(gw, "poison-chat") as client,
        chromium() as browser,
    ):
        assert gw.db is not None
        assert gw.dispatcher is not None
        await gw.db.write(lambda c: c.execute(REFUSE_POISON))
        sent = await client.send(f"poison {SECRET} please")
        assert (await client.recv_type("ack"))["status"] == "dead_letter"
        await gw.db.write(lambda c: c.execute("DROP TRIGGER refuse_poison"))  # the cause gone
        await rec.submit("c1", "lost on the way")
        await rec.wait_attempts(1)
        await gw.dispatcher.flush(5)
        [(letter,)] = await _rows(gw, "SELECT id FROM dead_letters")
        [(row,)] = await _rows(gw, "SELECT id FROM outbox WHERE state = 'failed'")

        for viewport, lang, shot in (
            (DESKTOP, "en", "console-delivery-desktop-en"),
            (PHONE, "zh-CN", "console-delivery-phone-zh"),
        ):
            async with page_on(browser, viewport=viewport, errors=errors) as page:
                await page.goto(gw.base_url + "/ops/delivery")
                await expect(page.locator("#checks li", has_text="channel rec")).to_be_visible()
                if lang != "en":
                    await page.select_option("#lang", lang)
                    await expect(page.locator("#dead-letters-panel h2")).to_have_text("死信")
                else:
                    await expect(page.locator("#dead-letters-panel h2")).to_have_text(
                        "Dead letters"
                    )
                line = page.locator(f"#dead-letters tr[data-letter-id='{letter}']")
                await expect(line).to_contain_text("poison-chat")
                await expect(line).to_contain_text(MASK)
                outbox = page.locator(f"#outbox tr[data-row-id='{row}']")
                await expect(outbox).to_contain_text("echo: lost on the way")
                await expect(page.locator("#channels tr[data-channel='rec']")).to_contain_text(
                    "PermanentSendError"
                )
                await _fits(page)
                await screenshot(page, shot, docs=True)
                await line.locator("button[data-action=show]").click()
                payload = page.locator("#dead-letter-payload pre")
                await expect(payload).to_contain_text(f'"text": "poison {MASK} please"')
                assert SECRET not in await page.locator("#ops-view").inner_text()
                await _fits(page)
                if lang == "en":
                    continue
                # on the phone, in Chinese: retry the dead letter, discard the reply
                await line.locator("button[data-action=retry]").click()
                await expect(page.locator("#delivery-note")).to_contain_text(f"死信 {letter}")
                await expect(line).to_have_count(0)
                reply = await client.recv_type("message")
                assert (reply["reply_to"], reply["text"]) == (sent, f"echo: poison {SECRET} please")
                await outbox.locator("button[data-action=discard]").click()
                await page.locator("dialog.ask button.danger").click()
                await expect(outbox).to_have_count(0)
                await expect(page.locator("#outbox-counts")).to_contain_text("已丢弃: 1")
                await page.select_option("#outbox-state", "discarded")  # filter by state
                await expect(outbox).to_contain_text("已丢弃")
                await expect(outbox.locator("button")).to_have_count(0)
                await _fits(page)
        assert await _rows(gw, "SELECT id FROM dead_letters") == []
        poisoned = "SELECT platform_id, state FROM inbox WHERE channel = 'websocket'"
        await wait_until(lambda: _rows(gw, poisoned + " AND state = 'done'"))
        assert await _rows(gw, poisoned) == [(f"poison-chat/{sent}", "done")]
        states = await _rows(gw, "SELECT id, state FROM outbox WHERE channel = 'rec'")
        assert states == [(row, "discarded")]
    assert errors == []
    assert len(llm.requests) == 2  # the reply discarded, and the retried message
