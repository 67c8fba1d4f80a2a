"""The finished chat page in headless Chromium against the real gateway and
the fake LLM: sessions named after their first message and renamed in place,
in-page dialogs (no native prompt/confirm), an image uploaded from the page
reaching the model as an image part, a provider failure shown as an error,
the live status panel, highlighted code with a copy button, and the operator
page's schedules and times in words. Screenshots: test-artifacts/web/."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.async_api import Dialog, Page, expect

from channels.ws_input import MAX_UPLOAD_BYTES
from tests.fakes.openai_server import FakeOpenAI
from tests.support import make_config, newest, running_gateway
from tests.web.browser import PHONE, chromium, page_on, screenshot

pytestmark = pytest.mark.browser
expect.set_options(timeout=15_000)

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c63f8cfc0f01f0005000201e2a3a4a40000000049454e44ae426082"
)
CODE_REPLY = "Here:\n\n```python\ndef add(a, b):\n    return a + b  # sum\n```\n"


def _native_dialogs(page: Page) -> list[str]:
    seen: list[str] = []

    async def on_dialog(dialog: Dialog) -> None:
        seen.append(dialog.type)
        await dialog.dismiss()

    page.on("dialog", on_dialog)
    return seen


async def _open(page: Page, url: str) -> None:
    await page.goto(url)
    await expect(page.locator("#conn")).to_have_attribute("data-state", "online")


async def _send(page: Page, text: str) -> None:
    await page.fill("#input", text)
    await page.press("#input", "Enter")


async def test_a_session_is_titled_from_its_first_message_and_renamed_in_place(
    home: Path, llm: FakeOpenAI
) -> None:
    errors: list[str] = []
    async with (
        running_gateway(make_config(home, llm.base_url)) as gw,
        chromium() as browser,
        page_on(browser, errors=errors) as page,
    ):
        native = _native_dialogs(page)
        await _open(page, gw.base_url + "/")
        await _send(page, "Plan a weekend in Lyon with a small budget")
        await expect(page.locator(".msg.assistant")).to_have_text(
            "echo: Plan a weekend in Lyon with a small budget"
        )
        name = page.locator("#sessions li.current .name")
        await expect(name).to_have_text("Plan a weekend in Lyon with a small bud…")
        await expect(page.locator("#session-title")).to_have_text(
            "Plan a weekend in Lyon with a small bud…"
        )
        await expect(page.locator("#status-fields [data-field=session]")).to_have_text(
            "Plan a weekend in Lyon with a small bud…"
        )

        # click the name: an input; Escape cancels
        await name.click()
        field = page.locator("#sessions li.current input.rename")
        await expect(field).to_be_focused()
        await field.fill("not this")
        await field.press("Escape")
        await expect(field).to_have_count(0)
        await expect(name).to_have_text("Plan a weekend in Lyon with a small bud…")
        # Enter saves, through /rename
        await name.click()
        await field.fill("Lyon weekend")
        await screenshot(page, "session-rename")
        await field.press("Enter")
        await expect(page.locator(".msg.notice", has_text="Lyon weekend")).to_be_visible()
        await page.reload()
        await expect(page.locator("#sessions li.current .name")).to_have_text("Lyon weekend")

        # archive asks in the page; Escape is "no"
        await page.locator("#sessions li.current button", has_text="Archive").click()
        dialog = page.locator("dialog.ask")
        await expect(dialog).to_be_visible()
        await expect(dialog.locator("button", has_text="Cancel")).to_be_visible()
        await page.keyboard.press("Escape")
        await expect(dialog).to_have_count(0)
        await expect(page.locator("#sessions li")).to_have_count(1)

        # on a phone the dialog fits the screen
        await page.set_viewport_size(PHONE)
        await page.click("#menu")
        await page.click("#new-session")
        box = await dialog.bounding_box()
        assert box is not None
        assert box["x"] >= 0
        assert box["x"] + box["width"] <= PHONE["width"]
        await expect(dialog.locator("input")).to_be_focused()
        await screenshot(page, "dialog-phone")
        await dialog.locator("input").fill("Second")
        await dialog.locator("button", has_text="Start").click()
        await expect(page.locator("#sessions li")).to_have_count(2)
        await expect(page.locator("#sessions li.current .name")).to_have_text("Second")
    assert native == []
    assert errors == []


async def test_an_image_uploaded_in_the_page_reaches_the_model_as_an_image_part(
    home: Path, llm: FakeOpenAI
) -> None:
    token = "upload-browser-token"
    loaded = make_config(home, llm.base_url, gateway={"auth_token": token})
    errors: list[str] = []
    async with (
        running_gateway(loaded) as gw,
        chromium() as browser,
        page_on(browser, errors=errors) as page,
    ):
        await page.add_init_script(f"localStorage.setItem('picobot.token', '{token}')")
        await _open(page, gw.base_url + "/")
        # too large: refused in the page, with the reason
        big = {
            "name": "huge.png",
            "mimeType": "image/png",
            "buffer": b"\0" * (MAX_UPLOAD_BYTES + 1),
        }
        await page.set_input_files("#file", files=[big])
        await expect(page.locator(".msg.error", has_text="huge.png is too large")).to_be_visible()

        image = {"name": "dot.png", "mimeType": "image/png", "buffer": PNG}
        await page.set_input_files("#file", files=[image])
        chip = page.locator("#attachments .attachment")
        await expect(chip).to_have_count(1)
        await expect(chip).not_to_have_class("attachment uploading")
        await expect(chip.locator("img.thumb")).to_have_count(1)
        await _send(page, "what is in this picture?")
        await expect(page.locator(".msg.user img.sent-image")).to_have_count(1)
        await expect(page.locator(".msg.assistant")).to_have_text("echo: what is in this picture?")
        await expect(page.locator("#attachments")).to_be_hidden()
        await screenshot(page, "upload")
    assert errors == []
    content = newest(llm.requests[0])["content"]
    assert isinstance(content, list), content
    urls = [p["image_url"]["url"] for p in content if p["type"] == "image_url"]
    assert len(urls) == 1
    assert urls[0].startswith("data:image/png;base64,")
    assert {"type": "text", "text": "what is in this picture?"} in content


async def test_a_provider_failure_is_shown_as_an_error_and_the_status_is_live(
    home: Path, llm: FakeOpenAI
) -> None:
    llm.add_error(401)  # the provider refuses the key
    llm.add_text(CODE_REPLY)
    async with (
        running_gateway(make_config(home, llm.base_url)) as gw,
        chromium() as browser,
        page_on(browser) as page,
    ):
        await page.context.grant_permissions(["clipboard-read", "clipboard-write"])
        await _open(page, gw.base_url + "/")
        await _send(page, "hello?")
        failed = page.locator(".msg.assistant.failed")
        await expect(failed).to_have_count(1)
        await expect(failed).to_have_attribute("role", "alert")
        await expect(failed.locator(".label")).to_contain_text("failed")
        await expect(page.locator("#status-fields [data-field=error]")).to_have_class("bad")
        await screenshot(page, "provider-failure")

        # the next reply is an ordinary one; while it runs the panel says so
        llm.hold()
        await _send(page, "show me code")
        state = page.locator("#status-fields [data-field=state]")
        await expect(state).to_contain_text("working")
        llm.release()
        await expect(state).to_have_text("idle")
        reply = page.locator(".msg.assistant").last
        await expect(reply.locator(".codeblock .code-lang")).to_have_text("python")
        await expect(reply).not_to_have_class("msg assistant failed")
        await expect(page.locator(".msg.assistant.failed")).to_have_count(1)
        await expect(reply.locator(".tok-keyword").first).to_have_text("def")
        await expect(reply.locator(".tok-comment")).to_have_text("# sum")
        await expect(page.locator("#status-fields [data-field=reply]")).not_to_have_text("–")
        await reply.locator("button.copy").click()
        await expect(reply.locator("button.copy")).to_have_text("Copied ✓")
        copied = await page.evaluate("() => navigator.clipboard.readText()")
        assert copied == "def add(a, b):\n    return a + b  # sum\n"
        await screenshot(page, "code-block")


async def test_the_operator_page_shows_schedules_and_times_in_words(
    home: Path, llm: FakeOpenAI
) -> None:
    async with (
        running_gateway(make_config(home, llm.base_url)) as gw,
        chromium() as browser,
        page_on(browser) as page,
    ):
        await page.goto(gw.base_url + "/ops/agent")
        row = page.locator("#jobs tbody tr", has_text="builtin.memory_maintenance_daily")
        await expect(row).to_contain_text("every 4 h at :00")  # cron 0 */4 * * *
        text = await row.inner_text()
        assert "{" not in text
        assert "T" not in text.split("every")[1]  # no ISO timestamp
        described = await page.evaluate(
            """async () => {
              const { describeSchedule } = await import("/js/schedule.js");
              return [
                {type: "interval", seconds: 1800}, {type: "interval", seconds: 86400},
                {type: "cron", expression: "0 9 * * *"}, {type: "cron", expression: "30 8 * * 1-5"},
                {type: "cron", expression: "*/15 * * * *"}, {type: "cron", expression: "5 4 1,15 * *"},
                {type: "delay", seconds: 90},
              ].map(describeSchedule);
            }"""
        )
        assert described == [
            "every 30 min",
            "every day",
            "every day at 09:00",
            "on weekdays at 08:30",
            "every 15 min",
            "cron “5 4 1,15 * *”",
            "once, 90 s after it was made",
        ]
        # words wrap between words: only ids may break anywhere
        wrap = await page.evaluate(
            """() => [...document.querySelectorAll('#jobs td')].map(
                 td => [td.querySelector('.id') !== null, getComputedStyle(td).overflowWrap])"""
        )
        assert all(style != "anywhere" for is_id, style in wrap if not is_id)
        await page.set_viewport_size(PHONE)
        await screenshot(page, "ops-jobs-phone")
