"""Outbox rows keep what a sender needs, typed."""

from __future__ import annotations

from pathlib import Path

from gateway.bus import OutboundMessage
from storage import outbox
from storage.db import Database


async def test_the_run_id_is_a_field_of_its_own_and_survives_the_row(tmp_path: Path) -> None:
    message = OutboundMessage("telegram", "42", "hi", run_id="run-7", metadata={"k": "v"})
    async with Database(tmp_path / "db.sqlite") as db:
        await db.write(lambda c: outbox.enqueue(c, message))
        [row] = (await db.read(lambda c: outbox.scan(c, "telegram", "9999"))).due
    assert row.to_message().run_id == "run-7"
    assert row.metadata == {"k": "v"}
