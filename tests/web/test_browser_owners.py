"""The web UI and chat ownership (docs/PROTOCOL.md "Chat ownership") in
headless Chromium against the real gateway: a chat id saved by an older
version keeps working for its owner; in a browser shared with another token
the saved chat is refused and a new, unguessable one is started; a link to
another user's chat opens nothing."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Page, WebSocket, expect

from tests.fakes.openai_server import FakeOpenAI
from tests.support import make_config, running_gateway, ws_client
from tests.web.browser import chromium, page_on

pytestmark = pytest.mark.browser
expect.set_options(timeout=15_000)

ALICE, BOB = "alice-browser-token", "bob-browser-token"
OLD_ID = "web-0123456789ab"  # 12 hex digits, as an older version saved them
SECRET = "alice's secret plan"


def _record_frames(page: Page, frames: list[dict[str, Any]]) -> None:
    def on_socket(ws: WebSocket) -> None:
        ws.on("framereceived", lambda payload: frames.append(json.loads(payload)))

    page.on("websocket", on_socket)


async def _saved(page: Page, token: str, chat_id: str) -> None:
    """This browser already holds `token` and `chat_id` when the page first loads."""
    seed = json.dumps({"token": token, "chat": chat_id})
    await page.add_init_script(
        f"""if (!sessionStorage.getItem("seeded")) {{
          const s = {seed};
          localStorage.setItem("picobot.token", s.token);
          localStorage.setItem("picobot.chat", s.chat);
          sessionStorage.setItem("seeded", "1");
        }}"""
    )


async def test_a_saved_chat_is_its_owners_and_another_token_starts_its_own(
    home: Path, llm: FakeOpenAI
) -> None:
    tokens = {"alice": ALICE, "bob": BOB}
    loaded = make_config(home, llm.base_url, channels={"websocket": {"tokens": tokens}})
    async with running_gateway(loaded) as gw:
        async with ws_client(gw, OLD_ID, token=ALICE) as alice:
            assert await alice.ask(SECRET) == f"echo: {SECRET}"
        async with chromium() as browser:
            async with page_on(browser) as page:  # alice's browser
                await _saved(page, ALICE, OLD_ID)
                await page.goto(gw.base_url + "/")
                await expect(page.locator(".msg.user")).to_have_text(SECRET)

            async with page_on(browser) as page:  # shared with bob
                frames: list[dict[str, Any]] = []
                _record_frames(page, frames)
                await _saved(page, BOB, OLD_ID)
                await page.goto(gw.base_url + "/")
                await expect(page.locator("#conn")).to_have_attribute("data-state", "online")
                fresh = await page.evaluate("() => localStorage.getItem('picobot.chat')")
                assert re.fullmatch(r"web-[0-9a-f]{32}", fresh)
                assert [f.get("code", f["type"]) for f in frames[:2]] == [
                    "forbidden_chat",
                    "welcome",
                ]
                assert frames[1]["chat_id"] == fresh
                assert SECRET not in json.dumps(frames)

                await page.goto(gw.base_url + f"/chat/{OLD_ID}")
                await expect(page.locator("#conn")).to_have_attribute("data-state", "forbidden")
                assert SECRET not in json.dumps(frames)
                assert SECRET not in await page.content()
