"""The gateway's own texts in the sender's language, end to end: the Telegram
fake's `from.language_code`, and WeChat (no hint) by `time.timezone`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agent.prompt_file import DEFAULT_AGENT_PROMPTS
from gateway.config.loading import LoadedConfig
from gateway.i18n import Locale, Msg, tr
from tests.channels.test_wechat_support import write_credentials
from tests.e2e.test_wechat import wechat_config
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.fakes.wechat_server import FakeWechat
from tests.support import PICOBOT, child_env, make_config, running_gateway

ALICE = "alice@im.wechat"


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


def telegram_config(
    home: Path, llm: FakeOpenAI, tg: FakeTelegram, *, locale: str | None = None, **sections: Any
) -> LoadedConfig:
    telegram = tg.settings() | ({"locale": locale} if locale else {})
    channels = {"websocket": {"enabled": False}, "telegram": telegram}
    return make_config(home, llm.base_url, channels=channels, **sections)


def no_key(**sections: Any) -> dict[str, Any]:
    """The provider's key names a variable that is not set: the gateway starts
    and answers every chat with the no-API-key notice."""
    return {"providers": {"default": {"api_key": "${PICOBOT_TEST_NO_KEY}"}}, **sections}


async def telegram_reply(tg: FakeTelegram, text: str, language: str | None) -> str:
    count = len(tg.sent_texts)
    await tg.add_message(text, chat_id=42, user_id=42, language_code=language)
    await tg.wait_for(lambda: len(tg.sent_texts) > count, timeout=10)
    return tg.sent_texts[count]


def help_lines(locale: Locale) -> list[str]:
    return [
        tr(locale, Msg.HELP_HEADER),
        f"/help — {tr(locale, Msg.HELP_HELP)}",
        f"/sessions — {tr(locale, Msg.HELP_SESSIONS)}",
        f"/stop — {tr(locale, Msg.HELP_STOP)}",
        f"/status — {tr(locale, Msg.HELP_STATUS)}",
        f"/pair — {tr(locale, Msg.HELP_PAIR)}{tr(locale, Msg.HELP_ADMINS_ONLY)}",
    ]


@pytest.mark.parametrize(("language", "locale"), [("zh-hans", Locale.ZH_CN), ("en", Locale.EN)])
async def test_telegram_commands_answer_in_the_senders_language(
    home: Path, llm: FakeOpenAI, tg: FakeTelegram, language: str, locale: Locale
) -> None:
    async with running_gateway(telegram_config(home, llm, tg)) as gw:
        help_text = await telegram_reply(tg, "/help", language)
        assert help_text == gw.commands.help_text(locale)
        assert set(help_lines(locale)) <= set(help_text.splitlines())
        assert await telegram_reply(tg, "/sessions", language) == tr(locale, Msg.NO_SESSIONS)
        assert await telegram_reply(tg, "/stop", language) == tr(locale, Msg.NOTHING_RUNNING)
        assert await telegram_reply(tg, "hi", language) == "echo: hi"
        sessions = (await telegram_reply(tg, "/sessions", language)).splitlines()
        assert sessions[0] == tr(locale, Msg.SESSIONS_HEADER)
        assert sessions[1].endswith(tr(locale, Msg.SESSIONS_CURRENT))
        assert sessions[-1] == tr(locale, Msg.SESSIONS_FOOTER)
        status = (await telegram_reply(tg, "/status", language)).splitlines()
        titled = tr(locale, Msg.TITLE, title="hi")  # from its first message
        assert status[0] == tr(locale, Msg.STATUS_SESSION, id="telegram:42", title=titled)
        turns = tr(locale, Msg.STATUS_TURNS, turns=1, state=tr(locale, Msg.STATE_IDLE))
        assert turns in status
        assert status[3] == tr(locale, Msg.STATUS_COMPACTED, when=tr(locale, Msg.NEVER))


@pytest.mark.parametrize(("language", "locale"), [("zh-hans", Locale.ZH_CN), ("en", Locale.EN)])
async def test_telegram_no_api_key_notice_in_the_senders_language(
    home: Path, llm: FakeOpenAI, tg: FakeTelegram, language: str, locale: Locale
) -> None:
    async with running_gateway(telegram_config(home, llm, tg, **no_key())):
        notice = await telegram_reply(tg, "hello", language)
    setting = "PICOBOT_TEST_NO_KEY (providers.default.api_key)"
    assert notice == tr(locale, Msg.NO_API_KEY, provider="default", setting=setting)
    assert llm.requests == []


async def test_a_channel_locale_overrides_the_platform_hint(
    home: Path, llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    loaded = telegram_config(home, llm, tg, locale="en", gateway={"locale": "zh-CN"})
    async with running_gateway(loaded):
        assert await telegram_reply(tg, "/stop", "zh-hans") == tr(Locale.EN, Msg.NOTHING_RUNNING)


async def wechat_reply(fake: FakeWechat, text: str) -> str:
    count = len(fake.sent)
    await fake.add_message(ALICE, text)
    await fake.wait_for(lambda: len(fake.sent) > count, timeout=10)
    return fake.sent[count].text


@pytest.mark.parametrize(("zone", "locale"), [("Asia/Shanghai", Locale.ZH_CN), ("UTC", Locale.EN)])
async def test_wechat_follows_the_time_zone_when_no_locale_is_set(
    home: Path, llm: FakeOpenAI, zone: str, locale: Locale
) -> None:
    async with FakeWechat() as fake:
        write_credentials(home, fake)
        loaded = wechat_config(home, llm, fake, sections={"time": {"timezone": zone}})
        async with running_gateway(loaded) as gw:
            assert await wechat_reply(fake, "/help") == gw.commands.help_text(locale)
            assert await wechat_reply(fake, "/sessions") == tr(locale, Msg.NO_SESSIONS)
            assert await wechat_reply(fake, "/stop") == tr(locale, Msg.NOTHING_RUNNING)
            status = await wechat_reply(fake, "/status")
            assert status == tr(locale, Msg.STATUS_NO_SESSION)
    # no AGENT.md yet: the gateway wrote the one of its language
    prompt = (home / "agent" / "AGENT.md").read_text(encoding="utf-8")
    assert prompt == DEFAULT_AGENT_PROMPTS[locale.value]


async def test_wechat_no_api_key_notice_in_chinese_by_time_zone(
    home: Path, llm: FakeOpenAI
) -> None:
    async with FakeWechat() as fake:
        write_credentials(home, fake)
        loaded = wechat_config(home, llm, fake, sections=no_key(time={"timezone": "Asia/Shanghai"}))
        async with running_gateway(loaded):
            notice = await wechat_reply(fake, "你好")
    setting = "PICOBOT_TEST_NO_KEY (providers.default.api_key)"
    assert notice == tr(Locale.ZH_CN, Msg.NO_API_KEY, provider="default", setting=setting)


async def test_picobot_init_locale_zh_cn_writes_the_chinese_agent_md(home: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        PICOBOT,
        "init",
        "--locale",
        "zh-CN",
        env=child_env(home),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    prompt = home / "agent" / "AGENT.md"
    assert prompt.read_text(encoding="utf-8") == DEFAULT_AGENT_PROMPTS["zh-CN"]
    assert f"wrote {prompt} (zh-CN)" in out.decode()


async def test_a_late_reply_to_a_chinese_sender_says_so_in_chinese(
    home: Path, llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    """The late note is added at send time: the reply's outbox row keeps the
    locale of the message it answers (storage/sql/delivery/outbox.py stores it with the row)."""
    gateway = {"outbound_retry_base_secs": 0.05, "outbound_stale_notice_secs": 0.05}
    tg.fail_next("sendMessage", 502, "Bad Gateway", times=3)
    async with running_gateway(telegram_config(home, llm, tg, gateway=gateway)):
        reply = await telegram_reply(tg, "hi", "zh-hans")
    reply_text, note = reply.split("\n\n")
    assert reply_text == "echo: hi"
    assert note.startswith("（延迟送达：这条回复写于 ")
    assert note.endswith("前，直到现在才送达。）")
