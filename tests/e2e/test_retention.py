"""Retention end to end: the keys and copies channels really write are the
ones the pass removes once the reply is delivered, and the running gateway
runs a pass at start."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from gateway.bus import OutboundMessage
from gateway.config import LoadedConfig
from gateway.retention import RetentionService, RetentionSettings
from storage.db import Connection, Database
from storage.retention import RowRef, row_of_state_key
from storage.store import Store
from tests.channel_runtime import MemoryState
from tests.channels.test_wechat_support import write_credentials
from tests.e2e.test_feishu import feishu_config
from tests.e2e.test_send_file import script, workspace_png
from tests.e2e.test_wechat import ALICE, wechat_config
from tests.fakes.feishu_server import FakeFeishu, message_event
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.wechat_server import FakeWechat
from tests.support import make_config, running_gateway


def row_keys(conn: Connection) -> list[tuple[str, str]]:
    rows = conn.execute("SELECT channel, key FROM channel_state ORDER BY key").fetchall()
    return [(r[0], r[1]) for r in rows if row_of_state_key(r[1]) is not None]


def sent_keys(conn: Connection) -> list[str]:
    rows = conn.execute("SELECT idempotency_key FROM outbox WHERE state = 'sent'").fetchall()
    return [r[0] for r in rows]


async def prune_after_stop(loaded: LoadedConfig) -> Sequence[tuple[str, str]]:
    """Once the gateway has stopped (every delivery recorded): the reply's
    copy and channel state are there, and one pass removes both."""
    async with Database(loaded.storage_path) as db:
        store = Store(db)
        before = await db.read(row_keys)
        keys = await db.read(sent_keys)
        copies = {p.name for p in (loaded.media_dir / "outbox").iterdir()}
        assert before, "the channel kept no state for the reply"
        assert copies
        assert copies <= set(keys)  # every copy belongs to a delivered row
        await RetentionService(store, loaded.media_dir, RetentionSettings()).run_pass()
        assert list((loaded.media_dir / "outbox").iterdir()) == []
        assert await db.read(row_keys) == []
        return before


async def test_feishu_upload_state_and_the_copy_go_once_delivered(
    home: Path, llm: FakeOpenAI
) -> None:
    async with FakeFeishu() as fs:
        loaded = feishu_config(home, llm, fs)
        workspace_png(loaded)
        script(llm)
        async with running_gateway(loaded):
            await fs.push_event(message_event("send me the chart"))
            await fs.wait_until(lambda: len(fs.sent) >= 3, 10)
    before = await prune_after_stop(loaded)
    assert [key.split(":")[0] for _, key in before] == ["upload"]


async def test_wechat_upload_state_and_the_copy_go_once_delivered(
    home: Path, llm: FakeOpenAI
) -> None:
    async with FakeWechat() as fake:
        write_credentials(home, fake)
        loaded = wechat_config(home, llm, fake)
        workspace_png(loaded)
        script(llm)
        async with running_gateway(loaded):
            await fake.add_message(ALICE, "send me the chart")
            await fake.wait_for(lambda: len(fake.sent) >= 3, timeout=10)
    before = await prune_after_stop(loaded)
    assert [key.split("-")[0] for _, key in before] == ["upload:picobot"]


async def test_telegram_progress_names_its_outbox_row() -> None:
    from channels.telegram.parts import PartProgress

    state = MemoryState()
    await PartProgress(state).save(OutboundMessage("telegram", "42", "x", outbox_id=17), [5], 0)
    [key] = state.values
    assert row_of_state_key(key) == RowRef(outbox_id=17)


async def test_the_gateway_runs_a_pass_at_start(home: Path, llm: FakeOpenAI) -> None:
    loaded = make_config(home, llm.base_url)
    received = loaded.media_dir / "telegram"
    received.mkdir(parents=True)
    old, recent = received / "old.jpg", received / "recent.jpg"
    for path in (old, recent):
        path.write_bytes(b"jpeg")
    month_ago = (datetime.now(UTC) - timedelta(days=31)).timestamp()
    os.utime(old, (month_ago, month_ago))
    async with running_gateway(loaded) as gw:
        assert gw.retention is not None
        async with asyncio.timeout(10):
            await gw.retention.passed()
    assert not old.exists()
    assert recent.exists()
