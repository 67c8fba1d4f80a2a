"""Retention end to end: after `send_file` really went out (the scenarios of
tests/e2e/test_send_file.py), the copy and the keys the channel really wrote
are what the pass removes; and the running gateway runs a pass soon after start."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from gateway.bus import OutboundMessage
from gateway.config.loading import LoadedConfig
from gateway.ops.retention import RetentionService, RetentionSettings
from storage.sql.retention import RowRef, row_of_state_key
from storage.sqlite.db import Connection, Database
from storage.store import Store
from tests.channel_runtime import MemoryState
from tests.e2e import test_send_file as send_file
from tests.fakes.openai_server import FakeOpenAI
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
    await send_file.test_feishu_uploads_the_png_once_and_sends_an_image_message(home, llm)
    before = await prune_after_stop(make_config(home, llm.base_url))
    assert [key.split(":")[0] for _, key in before] == ["upload"]


async def test_wechat_upload_state_and_the_copy_go_once_delivered(
    home: Path, llm: FakeOpenAI
) -> None:
    await send_file.test_wechat_uploads_through_the_cdn_and_sends_an_image_item(home, llm)
    before = await prune_after_stop(make_config(home, llm.base_url))
    assert [key.split("-")[0] for _, key in before] == ["upload:picobot"]


async def test_telegram_progress_names_its_outbox_row() -> None:
    from channels.telegram.parts import PartProgress

    state = MemoryState()
    await PartProgress(state).save(OutboundMessage("telegram", "42", "x", outbox_id=17), [5], 0)
    [key] = state.values
    assert row_of_state_key(key) == RowRef(outbox_id=17)


async def test_the_gateway_runs_a_pass_soon_after_start(home: Path, llm: FakeOpenAI) -> None:
    """The first pass waits a minute, or the interval when that is shorter."""
    loaded = make_config(home, llm.base_url, storage={"prune_interval_secs": 0.2})
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
