"""The retention pass (gateway/ops/retention.py) on a real database and real files:
a delivered reply's copy and channel state go, a pending reply's stay; old
received attachments go, recent ones and those of an unanswered message stay."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from gateway.bus import InboundMessage, MediaKind, MediaRef, OutboundMessage
from gateway.config.core import StorageConfig
from gateway.delivery.files import copy_for_outbox
from gateway.ops.media_retention import Removed, remove_paths
from gateway.ops.retention import ORPHAN_GRACE_SECS, RetentionService, RetentionSettings
from storage.sqlite.db import Database
from storage.store import Store

NOW = datetime.now(UTC)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    async with Database(tmp_path / "db.sqlite") as db:
        yield Store(db)


@pytest.fixture
def media(tmp_path: Path) -> Path:
    path = tmp_path / "media"
    path.mkdir()
    return path


def service(store: Store, media: Path, **settings: float) -> RetentionService:
    return RetentionService(store, media, RetentionSettings(**settings), clock=lambda: NOW)


async def queue_file(store: Store, media: Path, tmp_path: Path, name: str) -> tuple[int, Path]:
    """What OutboxFileSender does: a copy under media/outbox/<key>/, then the row."""
    source = tmp_path / name
    source.write_bytes(b"%PDF-1.4 " + name.encode())
    message = OutboundMessage("feishu", "oc_1", "the report")
    copy = copy_for_outbox(source, media / "outbox" / message.idempotency_key, 1_000)
    row = OutboundMessage(
        "feishu",
        "oc_1",
        "the report",
        idempotency_key=message.idempotency_key,
        media=(MediaRef(MediaKind.FILE, str(copy), "application/pdf", name),),
    )
    return await store.enqueue(row), copy


def age(path: Path, days: float) -> None:
    moment = (NOW - timedelta(days=days)).timestamp()
    os.utime(path, (moment, moment))


async def test_a_delivered_replys_copy_goes_and_a_pending_ones_stays(
    store: Store, media: Path, tmp_path: Path
) -> None:
    sent, sent_copy = await queue_file(store, media, tmp_path, "sent.pdf")
    _, pending_copy = await queue_file(store, media, tmp_path, "pending.pdf")
    failed, failed_copy = await queue_file(store, media, tmp_path, "failed.pdf")
    await store.mark_sent(sent)
    await store.mark_failed(failed, "gave up")
    counts = await service(store, media).run_pass()
    assert not sent_copy.parent.exists()
    assert pending_copy.read_bytes() == b"%PDF-1.4 pending.pdf"
    assert failed_copy.exists()  # `picobot outbox retry` can still send it
    assert counts.outbox_files.removed == 1


async def test_a_copy_stays_while_another_row_still_to_be_sent_names_it(
    store: Store, media: Path, tmp_path: Path
) -> None:
    """A message queued again gets a row (and key) of its own, naming the copy
    made for the first: that copy must outlive the first row's delivery."""
    first, copy = await queue_file(store, media, tmp_path, "report.pdf")
    again = OutboundMessage(
        "feishu", "oc_2", "the report", media=(MediaRef(MediaKind.FILE, str(copy)),)
    )
    second = await store.enqueue(again)
    await store.mark_sent(first)
    await service(store, media).run_pass()
    assert copy.exists()
    await store.mark_sent(second)
    await service(store, media).run_pass()
    assert not copy.parent.exists()


async def test_a_copy_without_a_row_goes_only_after_the_grace(
    store: Store, media: Path, tmp_path: Path
) -> None:
    """The copy is made just before its row is written: a fresh one is in flight."""
    orphans = media / "outbox"
    old, fresh = orphans / ("a" * 32), orphans / ("b" * 32)
    for folder in (old, fresh):
        folder.mkdir(parents=True)
        (folder / "x.pdf").write_bytes(b"x")
    age(old, ORPHAN_GRACE_SECS / 86_400 * 2)
    not_ours = orphans / "notes"
    not_ours.mkdir()
    age(not_ours, 400)
    await service(store, media).run_pass()
    assert not old.exists()
    assert fresh.exists()
    assert not_ours.exists()


async def test_channel_state_of_a_delivered_reply_goes_and_of_a_pending_one_stays(
    store: Store, media: Path, tmp_path: Path
) -> None:
    sent, _ = await queue_file(store, media, tmp_path, "sent.pdf")
    pending, _ = await queue_file(store, media, tmp_path, "pending.pdf")
    await store.mark_sent(sent)
    for row in (sent, pending):
        await store.set_channel_state("telegram", f"progress:{row}", "[1]")
    await store.set_channel_state("telegram", "offset", "77")
    counts = await service(store, media).run_pass()
    assert await store.channel_state("telegram", f"progress:{sent}") is None
    assert await store.channel_state("telegram", f"progress:{pending}") == "[1]"
    assert await store.channel_state("telegram", "offset") == "77"
    assert counts.channel_state == 1


async def test_old_received_media_is_aged_out(store: Store, media: Path, tmp_path: Path) -> None:
    telegram = media / "telegram"
    telegram.mkdir()
    old, recent, waiting = telegram / "old.jpg", telegram / "recent.jpg", telegram / "wait.ogg"
    for path in (old, recent, waiting):
        path.write_bytes(b"bytes")
    age(old, 31)
    age(recent, 29)
    age(waiting, 31)
    message = InboundMessage(
        "telegram", "42", "7", "", "m1", media=(MediaRef(MediaKind.AUDIO, str(waiting)),)
    )
    await store.record_inbound([message])  # not answered yet: its turn will read the file
    _, pending_copy = await queue_file(store, media, tmp_path, "pending.pdf")
    age(pending_copy, 31)
    outside = tmp_path / "outside.jpg"
    outside.write_bytes(b"not ours")
    age(outside, 400)
    (telegram / "link.jpg").symlink_to(outside)
    counts = await service(store, media, media_retention_days=30).run_pass()
    assert not old.exists()
    assert recent.exists()
    assert waiting.exists()
    assert pending_copy.exists()  # copies follow their row, not their age
    assert outside.exists()  # a symlink is never taken for its target
    assert counts.media_files.removed == 1


async def test_zero_days_keep_rows_and_files(store: Store, media: Path, tmp_path: Path) -> None:
    row = await store.enqueue(OutboundMessage("feishu", "oc_1", "hi"))
    await store.enqueue(OutboundMessage("feishu", "oc_1", "newest"))
    await store.mark_sent(row)
    old = media / "telegram" / "old.jpg"
    old.parent.mkdir()
    old.write_bytes(b"x")
    age(old, 400)
    later = RetentionService(
        store,
        media,
        RetentionSettings(retention_days=0, media_retention_days=0),
        clock=lambda: NOW + timedelta(days=400),
    )
    counts = await later.run_pass()
    assert old.exists()
    assert counts.rows == {}
    assert await store.outbox_counts() == {"sent": 1, "pending": 1}


async def test_rows_past_retention_go_and_one_line_says_what_went(
    store: Store, media: Path
) -> None:
    first = await store.enqueue(OutboundMessage("feishu", "oc_1", "old"))
    await store.enqueue(OutboundMessage("feishu", "oc_1", "newest"))
    await store.mark_sent(first)
    later = RetentionService(
        store, media, RetentionSettings(), clock=lambda: NOW + timedelta(days=31)
    )
    with capture_logs() as logs:
        await later.run_pass()
    [line] = [e for e in logs if e["event"] == "retention_pass"]
    assert line["log_level"] == "info"
    assert line["outbox"] == 1
    assert line["inbox"] == 0
    counts = await store.outbox_counts()
    assert counts == {"pending": 1}


async def test_a_pass_runs_at_start_and_the_service_stops(
    store: Store, media: Path, tmp_path: Path
) -> None:
    sent, copy = await queue_file(store, media, tmp_path, "sent.pdf")
    await store.mark_sent(sent)
    retention = service(store, media)
    async with asyncio.TaskGroup() as tg:
        await retention.start(tg)
        await retention.passed()
        await retention.stop()
    assert not copy.parent.exists()
    assert retention.passes == 1


def test_a_file_already_gone_counts_as_removed(tmp_path: Path) -> None:
    folder = tmp_path / ("c" * 32)
    folder.mkdir()
    (folder / "x.pdf").write_bytes(b"x")
    assert remove_paths([folder, tmp_path / "gone.jpg"]) == Removed(2, 0)
    assert not folder.exists()


def test_the_first_pass_waits_a_minute_or_the_interval_if_shorter() -> None:
    hourly = RetentionSettings.of(StorageConfig())
    assert (hourly.interval_secs, hourly.first_delay_secs) == (3600.0, 60.0)
    often = RetentionSettings.of(StorageConfig(prune_interval_secs=5))
    assert often.first_delay_secs == 5
