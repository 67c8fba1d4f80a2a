"""The chat page in Chinese in a Chinese browser, against the real gateway and
the fake LLM: the texts the page's modules write (the composer, the status
panel, the working time, the session list, code blocks, schedules in words)
come from gateway/i18n/web/chat.json; switching to English re-says them and
the choice outlives a reload. schedule.js says the same English without the
page's texts loaded. Screenshot: chat-phone-zh (docs/WEBUI.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.async_api import Page, expect

from tests.fakes.openai_server import FakeOpenAI
from tests.support import make_config, running_gateway
from tests.web.browser import PHONE, chromium, page_on, screenshot

pytestmark = pytest.mark.browser
expect.set_options(timeout=15_000)

CODE_REPLY = "这样：\n\n```\nhello\n```\n"
FIELDS = {
    "zh-CN": ["连接", "会话", "消息数", "当前", "最近回复", "最近错误"],
    "en": ["Connection", "Session", "Messages", "Now", "Last reply", "Last error"],
}
# every word of schedule.js at least once
SCHEDULES = """[
  {type: "interval", seconds: 1800}, {type: "interval", seconds: 86400},
  {type: "interval", seconds: 3600}, {type: "interval", seconds: 60},
  {type: "interval", seconds: 7200}, {type: "interval", seconds: 172800},
  {type: "delay", seconds: 90}, {type: "delay", seconds: 86400},
  {type: "cron", expression: "*/15 * * * *"}, {type: "cron", expression: "* * * * *"},
  {type: "cron", expression: "5 * * * *"}, {type: "cron", expression: "0 */4 * * *"},
  {type: "cron", expression: "0 9,21 * * *"}, {type: "cron", expression: "30 8 * * 1-5"},
  {type: "cron", expression: "0 10 * * 0,6"},
  {type: "cron", expression: "0 7 * * 0,1,2,3,4,5,6"},
  {type: "cron", expression: "0 7 1 * *", timezone: "Asia/Shanghai"},
  {type: "cron", expression: "5 4 1,15 * *"},
  {type: "at", at: "2026-05-01T09:00:00Z", timezone: "UTC"},
]"""
DESCRIBE = f"""async () => {{
  const {{ describeSchedule }} = await import("/js/schedule.js");
  return {SCHEDULES}.map(describeSchedule);
}}"""


async def _send(page: Page, text: str) -> None:
    await page.fill("#input", text)
    await page.press("#input", "Enter")


async def _page_speaks(page: Page, lang: str) -> None:
    """The composer and the status panel's labels in `lang`."""
    zh = lang == "zh-CN"
    await expect(page.locator("html")).to_have_attribute("lang", lang)
    await expect(page.locator("#input")).to_have_attribute(
        "placeholder", "输入消息…" if zh else "Message…"
    )
    await expect(page.locator("#send")).to_have_text("发送" if zh else "Send")
    await expect(page.locator("#stop")).to_have_text("停止" if zh else "Stop")
    await expect(page.locator("#status-fields dt")).to_have_text(FIELDS[lang])
    await expect(page.locator("#status-fields [data-field=connection]")).to_have_text(
        "已连接" if zh else "connected"
    )
    await expect(page.locator("#status-fields [data-field=state]")).to_have_text(
        "空闲" if zh else "idle"
    )


async def _a_held_turn(
    page: Page, llm: FakeOpenAI, text: str, working: re.Pattern[str], state: str
) -> None:
    """While a turn runs, the working line and the Now field say so in words."""
    llm.hold()
    await _send(page, text)
    await expect(page.locator("#working")).to_be_visible()
    await expect(page.locator("#working-text")).to_have_text(working)
    await expect(page.locator("#status-fields [data-field=state]")).to_contain_text(state)


async def test_the_chat_page_speaks_the_browsers_chinese_and_switches_to_english(
    home: Path, llm: FakeOpenAI
) -> None:
    llm.add_text(CODE_REPLY)
    errors: list[str] = []
    async with (
        running_gateway(make_config(home, llm.base_url)) as gw,
        chromium() as browser,
        page_on(browser, errors=errors, locale="zh-CN") as page,
    ):
        await page.goto(gw.base_url + "/")
        await expect(page.locator("#conn")).to_have_attribute("data-state", "online")
        await _page_speaks(page, "zh-CN")
        await expect(page.locator(".msg.notice.empty")).to_have_text("还没有消息。打个招呼吧。")

        await _send(page, "给我看代码")
        reply = page.locator(".msg.assistant").last
        await expect(reply.locator(".code-lang")).to_have_text("文本")
        await expect(reply.locator("button.copy")).to_have_text("复制")
        chat_id = await page.evaluate("() => localStorage.getItem('picobot.chat')")
        assert gw.store is not None
        records, _ = await gw.store.list_sessions("websocket", chat_id)
        assert len(records) == 1
        count = records[0].message_count
        assert count >= 2
        meta = page.locator("#sessions li.current .meta")
        await expect(meta).to_contain_text(f"{count} 条消息")
        await expect(page.locator("#sessions li.current button.rename")).to_have_text("重命名")

        await _a_held_turn(
            page, llm, "慢慢来", working=re.compile(r"^处理中… \d+ 秒$"), state="处理中 · "
        )
        await page.set_viewport_size(PHONE)
        await expect(page.locator("#sidebar")).not_to_be_in_viewport()  # slid away
        await screenshot(page, "chat-phone-zh", docs=True)
        assert await page.evaluate("() => document.documentElement.scrollWidth") <= PHONE["width"]

        # the language is switched while the turn runs: the page re-says what it keeps up
        await page.select_option("#lang", "en")
        await expect(page.locator("#working-text")).to_have_text(re.compile(r"^Working… \d+s$"))
        await expect(page.locator("#status-fields [data-field=state]")).to_contain_text(
            "working · "
        )
        await expect(meta).to_contain_text(f"{count} messages")
        llm.release()
        await expect(page.locator(".msg.assistant")).to_have_count(2)
        await _page_speaks(page, "en")

        # the choice is this browser's, over its language
        assert await page.evaluate("() => localStorage.getItem('picobot.lang')") == "en"
        await page.reload()
        await expect(page.locator("#conn")).to_have_attribute("data-state", "online")
        await _page_speaks(page, "en")
        await expect(page.locator(".msg.assistant .code-lang")).to_have_text("text")
        english = await page.evaluate(DESCRIBE)

        # back to Chinese: schedules in words, in the page and in the console's jobs
        await page.select_option("#lang", "zh-CN")
        await _page_speaks(page, "zh-CN")
        chinese = await page.evaluate(DESCRIBE)
        await page.goto(gw.base_url + "/ops/agent")
        row = page.locator("#jobs tbody tr", has_text="builtin.memory_maintenance_daily")
        await expect(row).to_contain_text("每 4 小时的 :00")  # cron 0 */4 * * *

        assert errors == []
        # schedule.js alone, in a document without the page's texts: the same English
        # (a text document; chromium asks it for a /favicon.ico the gateway has not)
        await page.goto(gw.base_url + "/js/i18n.js")  # shown as a text document
        await page.add_script_tag(url="/vendor/purify.min.js")
        alone = await page.evaluate(DESCRIBE)
    assert [e for e in errors if "/favicon.ico" not in e] == []
    assert english[:6] == [
        "every 30 min",
        "every day",
        "every hour",
        "every minute",
        "every 2 h",
        "every 2 days",
    ]
    assert english[12:14] == ["every day at 09:00, 21:00", "on weekdays at 08:30"]
    assert (
        english[15] == "on Sunday, Monday, Tuesday, Wednesday, Thursday, Friday, Saturday at 07:00"
    )
    assert english[16] == "monthly on day 1 at 07:00 (Asia/Shanghai)"
    assert alone == english
    assert chinese[:6] == ["每 30 分钟", "每天", "每小时", "每分钟", "每 2 小时", "每 2 天"]
    assert chinese[6:8] == ["一次，创建后 90 秒", "一次，创建后 1 天"]
    assert chinese[12:18] == [
        "每天 09:00、21:00",
        "工作日 08:30",
        "周末 10:00",
        "每星期日、星期一、星期二、星期三、星期四、星期五、星期六 07:00",
        "每月 1 日 07:00（Asia/Shanghai）",
        "cron 表达式“5 4 1,15 * *”",
    ]
    assert chinese[18].startswith("一次，")
    assert chinese[18].endswith("（UTC）")
    assert not any(c.isascii() and c.isalpha() for c in "".join(chinese[:15]))
