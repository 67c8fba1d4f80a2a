"""The same access policy on Feishu, WeChat and the WebSocket channel, end to end.

Telegram, groups and the whole pairing story are in test_access.py.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.i18n import Locale, Msg, tr
from tests.channels.test_wechat_support import write_credentials
from tests.e2e.test_feishu import feishu_config
from tests.e2e.test_wechat import wechat_config
from tests.fakes.feishu_server import FakeFeishu, message_event
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.wechat_server import FakeWechat
from tests.support import make_config, newest, running_gateway, ws_client

CODE = re.compile(r"\b([A-Z2-9]{4}-[A-Z2-9]{4})\b")


def asked(llm: FakeOpenAI) -> list[str]:
    return [newest(r)["content"] for r in llm.requests]


@pytest.fixture
async def fs() -> AsyncIterator[FakeFeishu]:
    async with FakeFeishu() as fake:
        yield fake


async def test_feishu_allow_from_matches_any_of_the_senders_ids(
    home: Path, llm: FakeOpenAI, fs: FakeFeishu
) -> None:
    # The fake reports user_id "u_<open_id>": allow_from may name either.
    loaded = feishu_config(home, llm, fs, allow_from=["u_ou_friend"])
    async with running_gateway(loaded):
        await fs.push_event(message_event("let me in", sender="ou_stranger", message_id="om_s"))
        await fs.push_event(message_event("hi", sender="ou_friend", message_id="om_f"))
        await fs.wait_until(lambda: len(fs.sent) >= 2, 10)
    replies = {s.target: s.text for s in fs.sent}
    assert replies["om_f"] == "echo: hi"
    assert "feishu:ou_stranger" in replies["om_s"]  # the id an admin needs
    assert asked(llm) == ["hi"]


async def test_wechat_refuses_a_sender_outside_allow_from(home: Path, llm: FakeOpenAI) -> None:
    alice, bob = "alice@im.wechat", "bob@im.wechat"
    async with FakeWechat() as fake:
        write_credentials(home, fake)
        async with running_gateway(wechat_config(home, llm, fake, allow_from=[bob])):
            await fake.add_message(alice, "let me in")
            await fake.add_message(bob, "hello")
            await fake.wait_for(lambda: len(fake.sent) >= 2, timeout=10)
        replies = {m.to_user_id: m.text for m in fake.sent}
    assert replies[bob] == "echo: hello"
    assert f"wechat:{alice}" in replies[alice]
    assert asked(llm) == ["hello"]


async def test_websocket_sender_paired_by_an_admin_on_another_chat(
    home: Path, llm: FakeOpenAI
) -> None:
    # The WebSocket channel reports the chat id as the sender id.
    loaded = make_config(
        home,
        llm.base_url,
        channels={"websocket": {"allow_from": [], "pairing": True}},
        gateway={"admins": ["websocket:chat-admin"]},
    )
    async with (
        running_gateway(loaded) as gw,
        ws_client(gw, "chat-new") as new,
        ws_client(gw, "chat-admin") as admin,
    ):
        offer = await new.ask("hello")
        match = CODE.search(offer)
        assert match is not None, offer
        approved = await admin.ask(f"/pair approve {match.group(1)}")
        assert approved.startswith("Approved websocket:chat-new")
        notice = await new.recv_type("message")
        assert notice["text"] == tr(Locale.EN, Msg.APPROVED_NOTICE)
        assert await new.ask("now?") == "echo: now?"
    assert asked(llm) == ["now?"]
