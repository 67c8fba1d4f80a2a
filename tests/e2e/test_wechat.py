"""WeChat end to end: fake iLink ⇄ the real gateway (storage, agent loop, outbox) ⇄ fake LLM."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp

from gateway.config.loading import LoadedConfig
from storage.sql.delivery.outbox import OutboxRow, OutboxState
from storage.sqlite.db import Database
from tests.channels.test_wechat_support import write_credentials
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.wechat_server import FakeWechat
from tests.support import make_config, running_gateway

ALICE = "alice@im.wechat"


def wechat_section(fake: FakeWechat, **extra: Any) -> dict[str, Any]:
    return {
        "enabled": True,
        "base_url": fake.base_url,
        "cdn_base_url": fake.cdn_base_url,
        "poll_timeout_secs": 2,
        "retry_delay_secs": 0.01,
        "backoff_secs": 0.05,
        "credential_check_secs": 0.02,
        **extra,
    }


def wechat_config(
    home: Path,
    llm: FakeOpenAI,
    fake: FakeWechat,
    *,
    sections: dict[str, Any] | None = None,
    **extra: Any,
) -> LoadedConfig:
    """`extra`: keys of the wechat section; `sections`: other top-level sections."""
    channels = {"wechat": wechat_section(fake, **extra)}
    return make_config(home, llm.base_url, channels=channels, **(sections or {}))


async def test_a_wechat_message_gets_one_reply_with_its_context_token(
    home: Path, llm: FakeOpenAI
) -> None:
    async with FakeWechat() as fake:
        write_credentials(home, fake)
        loaded = wechat_config(home, llm, fake)
        async with running_gateway(loaded):
            first = await fake.add_message(ALICE, "hello from wechat")
            await fake.wait_for(lambda: len(fake.sent) >= 1, timeout=10)
            await fake.replay(first)  # at-least-once delivery: must not be answered twice
            await fake.add_message(ALICE, "second")
            await fake.wait_for(lambda: len(fake.sent) >= 2, timeout=10)
            # typing was shown during the turns and cancelled after them
            await fake.wait_for(lambda: fake.typing.count((ALICE, 2)) >= 2, timeout=10)
        assert (ALICE, 1) in fake.typing
        assert [m.text for m in fake.sent] == ["echo: hello from wechat", "echo: second"]
        assert all(m.context_token == fake.latest_tokens[ALICE] for m in fake.sent[1:])
        assert fake.sent[0].context_token is not None
        assert fake.discarded == []
        assert fake.protocol_errors == []
        async with Database(loaded.storage_path) as db:
            rows = await db.read(
                lambda c: c.execute(
                    "SELECT role, content FROM messages WHERE session_id = ? AND role != 'system' ORDER BY seq",
                    (f"wechat:{ALICE}",),
                ).fetchall()
            )
        assert [(r["role"], r["content"]) for r in rows] == [
            ("user", "hello from wechat"),
            ("assistant", "echo: hello from wechat"),
            ("user", "second"),
            ("assistant", "echo: second"),
        ]


async def test_gateway_runs_not_ready_without_a_wechat_login(home: Path, llm: FakeOpenAI) -> None:
    async with FakeWechat() as fake:
        loaded = wechat_config(home, llm, fake)
        async with running_gateway(loaded) as gw, aiohttp.ClientSession() as http:
            async with http.get(f"{gw.base_url}/ready") as resp:
                body = await resp.json()
            assert resp.status == 503
            assert body["reasons"] == [
                "channel wechat: not logged in: run `picobot channels login wechat`"
            ]
            write_credentials(home, fake)  # `picobot channels login wechat` in another shell
            await fake.add_message(ALICE, "now?")
            await fake.wait_for(lambda: len(fake.sent) >= 1, timeout=10)
            async with http.get(f"{gw.base_url}/ready") as resp:
                assert resp.status == 200
        assert [m.text for m in fake.sent] == ["echo: now?"]


async def test_restart_resumes_without_a_second_answer(home: Path, llm: FakeOpenAI) -> None:
    async with FakeWechat() as fake:
        write_credentials(home, fake)
        loaded = wechat_config(home, llm, fake)
        async with running_gateway(loaded):
            first = await fake.add_message(ALICE, "before restart")
            await fake.wait_for(lambda: len(fake.sent) >= 1, timeout=10)
        await fake.add_message(ALICE, "while down")
        await fake.replay(first)  # the platform re-sends an answered message after the restart
        async with running_gateway(loaded):
            await fake.wait_for(lambda: len(fake.sent) >= 2, timeout=10)
            await fake.add_message(ALICE, "after restart")
            await fake.wait_for(lambda: len(fake.sent) >= 3, timeout=10)
        assert [m.text for m in fake.sent] == [
            "echo: before restart",
            "echo: while down",
            "echo: after restart",
        ]
        assert fake.discarded == []


async def test_a_ret_minus_2_reply_is_parked_with_its_reason_and_sent_once_after_the_next_message(
    home: Path, llm: FakeOpenAI
) -> None:
    async with FakeWechat() as fake:
        write_credentials(home, fake)
        loaded = wechat_config(home, llm, fake)
        fake.send_rets = [{"ret": -2, "errmsg": "context restricted"}]

        async def rows() -> list[Any]:
            async with Database(loaded.storage_path) as db:
                return await db.read(
                    lambda c: c.execute(
                        "SELECT text, state, last_error, attempts FROM outbox ORDER BY id"
                    ).fetchall()
                )

        async with running_gateway(loaded) as gw:
            await fake.add_message(ALICE, "first question")
            await fake.wait_for(lambda: len(fake.send_attempts) >= 1, timeout=10)
            assert gw.store is not None
            store = gw.store
            parked: list[OutboxRow] = []

            async def look() -> bool:
                parked[:] = [r for r in await store.outbox_rows() if r.state is OutboxState.PARKED]
                return bool(parked)

            async with asyncio.timeout(10):
                while not await look():
                    await asyncio.sleep(0.02)  # the park has no event to await from here
            [row] = parked
            assert row.text == "echo: first question"
            assert row.last_error is not None
            assert "context restricted" in row.last_error  # `picobot outbox list` shows it
            assert "next message" in row.last_error
            assert len(fake.send_attempts) == 1  # parked: no retry on a timer
            await fake.add_message(ALICE, "second question")
            await fake.wait_for(lambda: len(fake.sent) >= 2, timeout=10)
        assert [m.text for m in fake.sent] == ["echo: first question", "echo: second question"]
        texts = [a["item_list"][0]["text_item"]["text"] for a in fake.send_attempts]
        assert texts.count("echo: first question") == 2  # refused once, then sent once
        assert fake.duplicates == []
        assert [(r["text"], r["state"]) for r in await rows()] == [
            ("echo: first question", "sent"),
            ("echo: second question", "sent"),
        ]
