"""A message the inbox refuses alone becomes a dead letter with a DEAD_LETTER receipt."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

from gateway.bus import InboundMessage, Receipt
from gateway.commands import CommandRegistry
from gateway.ingress.dead_letters import DeadLetterSink
from gateway.ingress.inbound import InboundProcessor
from gateway.ops.metrics import Metrics
from storage.sqlite.db import Database
from storage.store import Store


def _processor(store: Store, metrics: Metrics) -> InboundProcessor:
    return InboundProcessor(
        cast(Any, None),  # the bus: _process is fed directly
        store,
        cast(Any, None),  # no session is reached: nothing here is accepted
        CommandRegistry(),
        lambda channel: None,
        dead_letters=DeadLetterSink(store, metrics),
    )


async def test_unstorable_message_is_dead_lettered_not_retried(tmp_path: Path) -> None:
    async with Database(tmp_path / "db.sqlite") as db:
        store = Store(db)
        metrics = Metrics()
        # past the bus (which would have made it storable): the inbox cannot store it
        poison = InboundMessage("telegram", "42", "42", "bad \ud83d", "42:7")
        poison.receipt = asyncio.get_running_loop().create_future()
        await _processor(store, metrics)._process([poison])
        assert poison.receipt.result() is Receipt.DEAD_LETTER
        [letter] = await store.dead_letters(10)
    assert (letter.channel, letter.platform_id) == ("telegram", "42:7")
    assert letter.reason == "not recorded: UnicodeEncodeError"
    assert "\\ud83d" in letter.payload  # kept escaped, as it came
    assert b'picobot_dead_letters_total{channel="telegram"} 1.0' in metrics.render()[0]
