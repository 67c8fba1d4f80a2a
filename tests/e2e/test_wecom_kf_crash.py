"""WeCom customer service with a real `picobot gateway` process killed mid-page."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from storage.sqlite.db import Database
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.wecom_kf_server import OPEN_KFID, FakeWecomKf
from tests.support import child_env, spawn_gateway

pytestmark = pytest.mark.slow

ALICE = "wmAliceExternal"


async def _rows(db_path: Path, sql: str) -> list[tuple[Any, ...]]:
    async with Database(db_path) as db:
        rows = await db.read(lambda c: c.execute(sql).fetchall())
    return [tuple(r) for r in rows]


async def test_sigkill_between_the_inbox_insert_and_the_cursor_write_loses_and_repeats_nothing(
    home: Path, llm: FakeOpenAI
) -> None:
    """One page: a text (recorded and answered), a file whose download hangs, a
    text after it. Killed while the page is half recorded, so the cursor still
    points before the page; the restart pulls it again: the first message is a
    known msgid (no second answer), the other two are answered once each."""
    db_path = home / "storage" / "sessions.db"
    async with FakeWecomKf() as fake:
        config = {
            "providers": {
                "default": {"base_url": llm.base_url, "api_key": "test-key", "max_retries": 0}
            },
            "models": {"default": {"model_id": "fake-model"}},
            "gateway": {"port": 0, "shutdown_timeout_secs": 10, "outbound_retry_base_secs": 0.05},
            "logging": {"format": "json"},
            "channels": {"websocket": {"enabled": False}, "wecom_kf": fake.settings()},
        }
        env = child_env(home)
        first = fake.add_message(ALICE, "before the kill")
        fake.add_media("SLOW", b"file bytes", "text/plain", "notes.txt")
        fake.add_message(ALICE, msgtype="file", body={"media_id": "SLOW"})
        fake.add_message(ALICE, "after the file")
        fake.hold_media()

        gw = await spawn_gateway(config, home, env)
        url = f"http://127.0.0.1:{gw.port}/webhooks/wecom_kf"
        assert await fake.notify(url) == (200, "success")
        await fake.wait_for(lambda: fake.media_waiting == 1 and len(fake.sent) == 1, timeout=20)
        assert await _rows(db_path, "SELECT platform_id FROM inbox") == [(first,)]
        cursor_sql = f"SELECT value FROM channel_state WHERE key = 'cursor:{OPEN_KFID}'"
        assert await _rows(db_path, cursor_sql) == []  # the page is not acknowledged
        assert await gw.stop(signal.SIGKILL) == -signal.SIGKILL
        fake.release_media()

        gw2 = await spawn_gateway(config, home, env)  # no callback: the start-up pull
        try:
            await fake.wait_for(lambda: len(fake.sent) >= 3, timeout=30)
        finally:
            assert await gw2.stop() == 0
        texts = fake.sent_texts
        assert len(texts) == 3
        assert texts.count("echo: before the kill") == 1
        assert texts.count("echo: after the file") == 1
        assert not any("could not be downloaded" in t for t in texts)
        assert [r["cursor"] for r in fake.sync_requests] == ["", ""]  # the same page again
        # the re-pulled first message was recognised by the inbox, not by memory
        assert [e["message_id"] for e in gw2.events("inbound_duplicate")] == [first]
        per_inbox = await _rows(
            db_path,
            "SELECT i.state, COUNT(o.id) FROM inbox i "
            "LEFT JOIN outbox o ON o.inbox_id = i.id GROUP BY i.id",
        )
        assert per_inbox == [("done", 1)] * 3
        assert await _rows(db_path, cursor_sql) == [("c3",)]
