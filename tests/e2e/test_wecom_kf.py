"""WeCom customer service end to end: fake WeCom ⇄ the real gateway (inbox, agent loop,
outbox) ⇄ fake LLM."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from gateway.config.loading import LoadedConfig
from storage.sqlite.db import Database
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.wecom_kf_server import OPEN_KFID, FakeWecomKf
from tests.support import child_env, make_config, running_gateway, spawn_gateway

ALICE = "wmAliceExternal"
BOB = "wmBobExternal"


def kf_config(home: Path, llm: FakeOpenAI, fake: FakeWecomKf, **extra: Any) -> LoadedConfig:
    return make_config(
        home,
        llm.base_url,
        channels={"wecom_kf": fake.settings(**extra)},
        gateway={"outbound_retry_base_secs": 0.05},
    )


async def _rows(loaded: LoadedConfig, sql: str) -> list[tuple[Any, ...]]:
    async with Database(loaded.storage_path) as db:
        rows = await db.read(lambda c: c.execute(sql).fetchall())
    return [tuple(r) for r in rows]


async def test_url_check_and_forged_requests_leave_the_daemon_healthy(
    home: Path, llm: FakeOpenAI
) -> None:
    async with FakeWecomKf() as fake:
        fake.add_message(ALICE, "still here?")
        loaded = kf_config(home, llm, fake)
        async with running_gateway(loaded) as gw, aiohttp.ClientSession() as http:
            url = f"{gw.base_url}/webhooks/wecom_kf"
            assert await fake.verify_url(url, "4242424242") == (200, "4242424242")
            assert (await fake.verify_url(url, "x", bad_signature=True))[0] == 401
            assert (await fake.verify_url(url, "x", receive_id="wwOTHERCORP"))[0] == 400
            assert (await fake.verify_url(url, "x", encrypt="AAAAAAAAAAAAAAAAAAAAAA=="))[0] == 400
            assert (await fake.notify(url, bad_signature=True))[0] == 401
            assert (await fake.notify(url, bad_ciphertext=True))[0] == 400
            assert (await fake.notify(url, receive_id="wwOTHERCORP"))[0] == 400
            async with http.post(url, data=b"<xml><Encrypt>") as resp:
                assert resp.status == 400
            async with http.get(f"{gw.base_url}/ready") as resp:
                assert resp.status == 200
            assert fake.sync_requests == []  # nothing forged got through
            assert await fake.notify(url) == (200, "success")
            await fake.wait_for(lambda: len(fake.sent) >= 1)
        assert fake.sent_texts == ["echo: still here?"]


async def test_two_pages_each_customer_message_answered_once_and_replays_ignored(
    home: Path, llm: FakeOpenAI
) -> None:
    async with FakeWecomKf(page_size=2) as fake:
        first = fake.add_message(ALICE, "one")
        fake.add_message(ALICE, "a human servicer wrote this", origin=5)
        fake.add_event("enter_session", BOB, welcome_code="WELCOME")
        fake.add_message(BOB, "two")
        fake.add_message(ALICE, "three")
        loaded = kf_config(home, llm, fake)
        async with running_gateway(loaded) as gw:
            url = f"{gw.base_url}/webhooks/wecom_kf"
            assert await fake.notify(url) == (200, "success")
            await fake.wait_for(lambda: len(fake.sent) >= 3)
            # WeCom redelivers the callback, and serves msgid `first` once more
            fake.replay(first)
            assert await fake.notify(url) == (200, "success")
            assert await fake.notify(url) == (200, "success")
            fake.add_message(BOB, "four")
            assert await fake.notify(url) == (200, "success")
            await fake.wait_for(lambda: len(fake.sent) >= 4)
        sent = sorted((m.touser, m.text) for m in fake.sent)
        assert sent == [
            (ALICE, "echo: one"),
            (ALICE, "echo: three"),
            (BOB, "echo: four"),
            (BOB, "echo: two"),
        ]
        assert all(m.open_kfid == OPEN_KFID for m in fake.sent)
        assert [r["cursor"] for r in fake.sync_requests[:3]] == ["", "c2", "c4"]
        assert fake.protocol_errors == []
        inbox = await _rows(loaded, "SELECT platform_id, state FROM inbox ORDER BY id")
        assert len(inbox) == 4
        assert {state for _, state in inbox} == {"done"}
        stored = await _rows(
            loaded,
            "SELECT value FROM channel_state WHERE channel = 'wecom_kf' AND key LIKE 'cursor:%'",
        )
        assert stored == [("c7",)]


async def test_token_expiry_mid_run_refreshes_once_and_the_reply_goes_out(
    home: Path, llm: FakeOpenAI
) -> None:
    async with FakeWecomKf() as fake:
        loaded = kf_config(home, llm, fake)
        async with running_gateway(loaded) as gw:
            url = f"{gw.base_url}/webhooks/wecom_kf"
            fake.add_message(ALICE, "first")
            await fake.notify(url)
            await fake.wait_for(lambda: len(fake.sent) >= 1)
            fake.expire_tokens()  # the next call with the cached token gets 42001
            fake.add_message(ALICE, "second")
            await fake.notify(url)
            await fake.wait_for(lambda: len(fake.sent) >= 2)
        assert fake.sent_texts == ["echo: first", "echo: second"]
        assert fake.token_requests == 2
        outbox = await _rows(loaded, "SELECT state, attempts FROM outbox ORDER BY id")
        assert [state for state, _ in outbox] == ["sent", "sent"]


async def test_a_closed_48_hour_window_fails_the_row_with_the_reason(
    home: Path, llm: FakeOpenAI
) -> None:
    async with FakeWecomKf() as fake:
        loaded = kf_config(home, llm, fake)
        async with running_gateway(loaded) as gw:
            # the account's first pull finds nothing; what comes after it is answered
            await fake.notify(f"{gw.base_url}/webhooks/wecom_kf")
            await fake.wait_for(lambda: len(fake.sync_requests) >= 1)
            fake.add_message(ALICE, "written three days ago", send_time=0)
            await fake.notify(f"{gw.base_url}/webhooks/wecom_kf")
            await fake.wait_for(lambda: len(fake.refused_sends) >= 1)
            await _until_failed(loaded)
        assert fake.sent == []
        assert fake.refused_sends == [("echo: written three days ago", 95001)]
        [(state, error)] = await _rows(loaded, "SELECT state, last_error FROM outbox")
        assert state == "failed"
        assert "95001" in error
        assert "48 h" in error


async def _until_failed(loaded: LoadedConfig) -> None:
    """The dispatcher marks the row right after the refusal: the row is all there is."""
    async with asyncio.timeout(10):
        while not await _rows(loaded, "SELECT id FROM outbox WHERE state = 'failed'"):
            await asyncio.sleep(0.02)


async def test_a_malformed_item_is_a_dead_letter_and_the_messages_around_it_are_answered(
    home: Path, llm: FakeOpenAI
) -> None:
    async with FakeWecomKf() as fake:
        fake.add_message(ALICE, "before")
        fake.add_raw({"msgid": "broken1", "msgtype": "text", "origin": 3, "text": {"content": "x"}})
        fake.add_message(BOB, "after")
        loaded = kf_config(home, llm, fake)
        async with running_gateway(loaded) as gw:
            assert await fake.notify(f"{gw.base_url}/webhooks/wecom_kf") == (200, "success")
            await fake.wait_for(lambda: len(fake.sent) >= 2)
        assert sorted(m.text for m in fake.sent) == ["echo: after", "echo: before"]
    letters = await _rows(loaded, "SELECT channel, platform_id, reason FROM dead_letters")
    assert letters == [
        (
            "wecom_kf",
            "broken1",
            "malformed sync_msg item: sync_msg message without external_userid or open_kfid",
        )
    ]


@pytest.mark.slow
async def test_a_callback_replayed_ten_minutes_later_is_refused_by_a_gateway_process(
    home: Path, llm: FakeOpenAI
) -> None:
    """Signed correctly but 10 minutes old: 403 and nothing pulled; a fresh
    callback is answered (a real `picobot gateway` process)."""
    async with FakeWecomKf() as fake:
        fake.add_message(ALICE, "replay me")
        config = {
            "providers": {
                "default": {"base_url": llm.base_url, "api_key": "test-key", "max_retries": 0}
            },
            "models": {"default": {"model_id": "fake-model"}},
            "gateway": {"port": 0, "shutdown_timeout_secs": 10, "outbound_retry_base_secs": 0.05},
            "logging": {"format": "json"},
            "channels": {"websocket": {"enabled": False}, "wecom_kf": fake.settings()},
        }
        gw = await spawn_gateway(config, home, child_env(home))
        try:
            url = f"http://127.0.0.1:{gw.port}/webhooks/wecom_kf"
            stale = await fake.notify(url, timestamp=time.time() - 600)
            assert stale == (403, "timestamp outside the replay window")
            assert fake.sync_requests == []
            assert await fake.notify(url) == (200, "success")
            await fake.wait_for(lambda: len(fake.sent) == 1, timeout=20)
        finally:
            assert await gw.stop() == 0
    assert fake.sent_texts == ["echo: replay me"]
    assert [
        e["skew_secs"] >= 600 for e in gw.events("wecom_kf callback: timestamp outside the window")
    ] == [True]
