"""Outbox rows keep what a sender needs, typed."""

from __future__ import annotations

from gateway.bus import OutboundMessage
from storage.sql.delivery import outbox
from tests.storage.conftest import OpenStorage


async def test_the_run_id_and_locale_are_fields_of_their_own_and_survive_the_row(
    open_storage: OpenStorage,
) -> None:
    message = OutboundMessage(
        "telegram", "42", "hi", run_id="run-7", metadata={"k": "v"}, locale="zh-CN"
    )
    async with open_storage() as db:
        await db.write(lambda c: outbox.enqueue(c, message))
        [row] = (await db.read(lambda c: outbox.scan(c, "telegram", "9999"))).due
    assert row.to_message().run_id == "run-7"
    assert row.to_message().locale == "zh-CN"
    assert outbox.OutboxRow.new(message, row.id).locale == "zh-CN"
    assert row.metadata == {"k": "v"}
