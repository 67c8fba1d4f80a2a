"""Approval by button: Telegram's inline keyboard (callback query) and Feishu's
card (card action), against the fake platforms with the real gateway."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway.config.loading import LoadedConfig
from tests.fakes.feishu_server import (
    FakeFeishu,
    Sent,
    card_action_event,
    config_dict,
    message_event,
)
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.support import make_config, newest, running_gateway

MARK = "touch approved.txt"
RULES = {"approval": {"tools": {"bash": "always"}}, "bash": {"sandbox": "off"}}


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


def telegram_with_approvals(
    home: Path, llm: FakeOpenAI, tg: FakeTelegram, **overrides: Any
) -> LoadedConfig:
    return make_config(
        home,
        llm.base_url,
        channels={"websocket": {"enabled": False}, "telegram": tg.settings(**overrides)},
        tools=RULES,
    )


@pytest.mark.parametrize(
    ("locale", "asked", "labels"),
    [
        ("en", "Approval needed", ["✅ Approve", "❌ Deny"]),
        ("zh-CN", "需要审批", ["✅ 批准", "❌ 拒绝"]),  # labelled in the chat's language
    ],
)
async def test_telegram_approve_button_resumes_the_turn(
    home: Path, llm: FakeOpenAI, tg: FakeTelegram, locale: str, asked: str, labels: list[str]
) -> None:
    llm.add_tool_call("bash", {"command": MARK})
    llm.add_text("Made it.")
    async with running_gateway(telegram_with_approvals(home, llm, tg, locale=locale)):
        await tg.add_message("make the file", chat_id=42, user_id=42)
        await tg.wait_for(lambda: any(asked in t for t in tg.sent_texts), 10)
        [ask] = [c for c in tg.calls_of("sendMessage") if c.params.get("reply_markup")]
        [buttons] = json.loads(ask.params["reply_markup"])["inline_keyboard"]
        assert [b["text"] for b in buttons] == labels
        assert not (home / "workspace" / "approved.txt").exists()
        await tg.press(ask, buttons[0]["callback_data"])
        await tg.wait_for(lambda: "Made it." in tg.sent_texts, 10)
        [answered] = await tg.wait_for_calls("answerCallbackQuery", 1)
    assert (home / "workspace" / "approved.txt").exists()
    assert answered.params["callback_query_id"]
    assert tg.sent_texts[-1] == "Made it."
    assert "denied" not in newest(llm.requests[1])["content"]


async def test_telegram_a_press_by_someone_else_is_not_taken(
    home: Path, llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    llm.add_tool_call("bash", {"command": MARK})
    groups = {"allow": "*", "require_mention": False}
    async with running_gateway(telegram_with_approvals(home, llm, tg, groups=groups)):
        await tg.add_message("make the file", chat_id=-100, user_id=42, chat_type="supergroup")
        await tg.wait_for(lambda: any("Approval needed" in t for t in tg.sent_texts), 10)
        [ask] = [c for c in tg.calls_of("sendMessage") if c.params.get("reply_markup")]
        data = json.loads(ask.params["reply_markup"])["inline_keyboard"][0][0]["callback_data"]
        await tg.press(ask, data, user_id=77, username="mallory")
        await tg.wait_for(lambda: any("Only the person" in t for t in tg.sent_texts), 10)
    assert not (home / "workspace" / "approved.txt").exists()
    assert len(llm.requests) == 1


@pytest.fixture
async def fs() -> AsyncIterator[FakeFeishu]:
    async with FakeFeishu() as fake:
        yield fake


def feishu_with_approvals(
    home: Path, llm: FakeOpenAI, fs: FakeFeishu, **overrides: Any
) -> LoadedConfig:
    section = config_dict(
        fs.base_url, ws_ping_interval_secs=5.0, ws_reconnect_base_secs=0.05, **overrides
    )
    return make_config(
        home,
        llm.base_url,
        channels={"websocket": {"enabled": False}, "feishu": section},
        tools=RULES,
    )


def cards(fs: FakeFeishu) -> list[Sent]:
    return [s for s in fs.sent if s.msg_type == "interactive"]


APPROVED = "exit_code: 0\n(no output)"
DENIED = "[denied by user: no reason given]"


@pytest.mark.parametrize(
    ("locale", "labels", "label", "final", "result"),
    [
        ("en", ["Approve", "Deny"], "Approve", "Made it.", APPROVED),
        ("en", ["Approve", "Deny"], "Deny", "Fine, I will not.", DENIED),
        ("zh-CN", ["批准", "拒绝"], "批准", "Made it.", APPROVED),  # in the chat's language
    ],
)
async def test_feishu_card_button_resumes_the_turn(
    home: Path,
    llm: FakeOpenAI,
    fs: FakeFeishu,
    locale: str,
    labels: list[str],
    label: str,
    final: str,
    result: str,
) -> None:
    llm.add_tool_call("bash", {"command": MARK})
    llm.add_text(final)
    async with running_gateway(feishu_with_approvals(home, llm, fs, locale=locale)):
        await fs.push_event(message_event("make the file"))
        await fs.wait_until(lambda: bool(cards(fs)), 10)
        [card] = cards(fs)
        [actions] = [el for el in card.content["elements"] if el.get("tag") == "action"]
        assert [b["text"]["content"] for b in actions["actions"]] == labels
        assert MARK in card.text
        event = card_action_event(card, label)
        press = await fs.push_event(event)
        await fs.push_event(event)  # delivered twice: taken once
        await fs.wait_until(lambda: any(s.text == final for s in fs.sent), 10)
    assert fs.acks[press] == 200
    assert (home / "workspace" / "approved.txt").exists() == (result == APPROVED)
    assert len(llm.requests) == 2
    assert [s.text for s in fs.sent][-1] == final
    assert newest(llm.requests[1])["content"] == result
