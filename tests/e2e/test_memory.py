"""Long-term memory through a real gateway: Feishu and Telegram fakes, the
fake LLM's scripted memory tool calls, and the database checked after."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway.config.loading import LoadedConfig
from storage.sqlite.db import Database
from tests.fakes.feishu_server import FakeFeishu, config_dict, message_event
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.support import make_config, running_gateway

FACT = "偏好中文回答 ZQX-7"  # distinctive, so a request either carries it or not
PUT = {"action": "put", "namespace": "preferences", "memory_key": "language", "content": FACT}
SEARCH = {"action": "search", "query": "中文回答"}


@pytest.fixture
async def fs() -> AsyncIterator[FakeFeishu]:
    async with FakeFeishu() as fake:
        yield fake


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


def two_channels(
    home: Path, llm: FakeOpenAI, fs: FakeFeishu, tg: FakeTelegram, **sections: Any
) -> LoadedConfig:
    return make_config(
        home,
        llm.base_url,
        channels={
            "websocket": {"enabled": False},
            "feishu": config_dict(fs.base_url, ws_reconnect_base_secs=0.05),
            "telegram": tg.settings(),
        },
        **sections,
    )


def tool_results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m.get("role") == "tool"]


class Turns:
    """Send one message, wait for its reply, return the LLM requests it made."""

    def __init__(self, llm: FakeOpenAI, fs: FakeFeishu, tg: FakeTelegram) -> None:
        self.llm, self.fs, self.tg = llm, fs, tg

    async def feishu(self, text: str, chat_id: str, sender: str, msg_id: str) -> list[Any]:
        """`msg_id` is the event id: Feishu's dedup key, the turn's message id."""
        before, replies = len(self.llm.requests), len(self.fs.sent)
        await self.fs.push_event(
            message_event(text, chat_id=chat_id, sender=sender, event_id=msg_id)
        )
        await self.fs.wait_until(lambda: len(self.fs.sent) > replies, 10)
        return self.llm.requests[before:]

    async def remember(self, text: str, msg_id: str) -> list[Any]:
        """Feishu user 7001 in chat oc_a; the model puts FACT."""
        self.llm.add_tool_call("memory_manage", PUT)
        self.llm.add_text("noted")
        return await self.feishu(text, "oc_a", "7001", msg_id)

    async def telegram(self, text: str, user_id: int) -> list[Any]:
        before, replies = len(self.llm.requests), len(self.tg.sent_texts)
        await self.tg.add_message(text, chat_id=user_id, user_id=user_id)
        await self.tg.wait_for(lambda: len(self.tg.sent_texts) > replies, 10)
        return self.llm.requests[before:]


async def test_memories_are_scoped_to_one_user_on_one_channel(
    home: Path, llm: FakeOpenAI, fs: FakeFeishu, tg: FakeTelegram
) -> None:
    loaded = two_channels(home, llm, fs, tg)
    turns = Turns(llm, fs, tg)
    async with running_gateway(loaded):
        put_turn = await turns.remember("please answer in Chinese", "om_put")
        # the write is not injected back: the follow-up request carries only the tool result
        assert tool_results(put_turn[1]) == ["created preferences/language"]
        assert all(m.get("role") != "system" or FACT not in str(m) for m in put_turn[1]["messages"])

        for chat, sender, msg in (("oc_b", "7001", "om_s1"), ("oc_a", "7002", "om_s2")):
            llm.add_tool_call("memory_search", SEARCH)
            llm.add_text("done")
            searched = await turns.feishu("what language do I like?", chat, sender, msg)
            if chat == "oc_b":  # (oc_a's own history holds the put's arguments)
                assert FACT not in json.dumps(searched[0], ensure_ascii=False)  # before searching
            found = json.loads(tool_results(searched[1])[-1])["results"]
            if sender == "7001":
                assert [r["content"] for r in found] == [FACT]  # u1, another chat
            else:
                assert found == []  # u2, the same chat

        llm.add_tool_call("memory_search", SEARCH)
        llm.add_text("done")
        on_telegram = await turns.telegram("what language do I like?", 7001)
        assert json.loads(tool_results(on_telegram[1])[-1])["results"] == []
        plain = await turns.feishu("hello again", "oc_c", "7001", "om_plain")
        assert FACT not in json.dumps(plain, ensure_ascii=False)  # no search: no memory

    async with Database(loaded.storage_path) as db:
        row, seq = await db.read(
            lambda c: (
                c.execute("SELECT * FROM memories").fetchone(),
                c.execute(
                    "SELECT seq FROM messages WHERE session_id = 'feishu:oc_a' AND role = 'user'"
                    " AND content = 'please answer in Chinese'"
                ).fetchone()[0],
            )
        )
    assert (row["scope_kind"], row["scope_key"], row["source_type"]) == (
        "user",
        "feishu:7001",
        "agent",
    )
    assert (row["source_session_id"], row["source_message_id"]) == ("feishu:oc_a", "om_put")
    assert row["source_message_seq"] == seq
    assert (row["source_channel"], row["source_chat_id"]) == ("feishu", "oc_a")


async def test_memories_survive_a_restart_and_tools_disabled_removes_them(
    home: Path, llm: FakeOpenAI, fs: FakeFeishu, tg: FakeTelegram
) -> None:
    loaded = two_channels(home, llm, fs, tg)
    turns = Turns(llm, fs, tg)
    async with running_gateway(loaded):
        await turns.remember("remember", "om_1")
    async with running_gateway(loaded):
        llm.add_tool_call("memory_search", {"action": "get", "namespace": "preferences",
                                            "memory_key": "language"})  # fmt: skip
        llm.add_text("done")
        got = await turns.feishu("recall", "oc_a", "7001", "om_2")
        assert json.loads(tool_results(got[1])[-1])["content"] == FACT
        names = {t["function"]["name"] for t in got[0]["tools"]}
        assert {"memory_search", "memory_manage"} <= names
    for disabled in ("memory_search", "memory_manage"):
        limited = two_channels(home, llm, fs, tg, tools={"disabled": [disabled]})
        async with running_gateway(limited):
            asked = await turns.feishu("hi", "oc_a", "7001", f"om_{disabled}")
        names = {t["function"]["name"] for t in asked[0]["tools"]}
        assert disabled not in names
        assert len({"memory_search", "memory_manage"} - names) == 1
