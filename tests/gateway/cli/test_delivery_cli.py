"""`picobot outbox discard` and `picobot dead-letters retry|discard` on a
real database file: the storage functions the console's delivery view runs
too. A dead letter retried with the gateway stopped is answered at its next
start."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from gateway.bus import InboundMessage, OutboundMessage
from gateway.cli.program import main
from storage.sql.delivery import dead_letters, inbox, outbox
from storage.sqlite.db import Database
from tests.fakes.openai_server import FakeOpenAI
from tests.support import make_config, running_gateway, wait_until


async def _picobot(config: Path, *args: str) -> int:
    return await asyncio.to_thread(main, [*args, "--config", str(config)])


def _config(home: Path, db: Path) -> Path:
    path = home / "cli-config.json"
    path.write_text(json.dumps({"storage": {"path": str(db)}}))
    return path


async def test_outbox_discard_gives_a_failed_row_up(tmp_path: Path, capsys: Any) -> None:
    db_path = tmp_path / "db.sqlite"
    async with Database(db_path) as db:

        def rows(c: Any) -> tuple[int, int]:
            failed = outbox.enqueue(c, OutboundMessage("telegram", "42", "lost"))
            outbox.mark_failed(c, failed, "PermanentSendError: blocked")
            return failed, outbox.enqueue(c, OutboundMessage("telegram", "42", "waiting"))

        failed, pending = await db.write(rows)
    config = _config(tmp_path, db_path)
    assert await _picobot(config, "outbox", "discard", str(failed)) == 0
    assert f"outbox row {failed} discarded" in capsys.readouterr().out
    assert await _picobot(config, "outbox", "discard", str(pending)) == 1
    assert "not failed or parked" in capsys.readouterr().out
    async with Database(db_path) as db:
        states = await db.read(lambda c: c.execute("SELECT id, state FROM outbox").fetchall())
    assert sorted(tuple(r) for r in states) == [(failed, "discarded"), (pending, "pending")]


async def test_dead_letters_retry_and_discard_and_the_next_start_answers(
    home: Path, llm: FakeOpenAI, capsys: Any
) -> None:
    loaded = make_config(home, llm.base_url)
    message = InboundMessage("websocket", "cli-chat", "cli-chat", "kept aside", "cli-chat/m1")
    async with Database(loaded.storage_path) as db:

        def letters(c: Any) -> tuple[int, int]:
            payload = inbox.inbound_to_json(message, ensure_ascii=True)
            refused = dead_letters.record(c, "websocket", "cli-chat/m1", payload, "not recorded: X")
            raw = dead_letters.record(c, "telegram", "7", b'{"update_id": 7}', "malformed update")
            return refused, raw

        refused, raw = await db.write(letters)
    config = _config(home, loaded.storage_path)
    assert await _picobot(config, "dead-letters", "retry", str(raw)) == 1
    assert "it can only be discarded" in capsys.readouterr().out
    assert await _picobot(config, "dead-letters", "retry", str(refused)) == 0
    assert "the gateway answers it when it next starts" in capsys.readouterr().out
    assert await _picobot(config, "dead-letters", "retry", str(refused)) == 1
    assert f"no dead letter {refused}" in capsys.readouterr().out
    assert await _picobot(config, "dead-letters", "discard", str(raw)) == 0
    assert await _picobot(config, "dead-letters", "discard", str(raw)) == 1

    async with running_gateway(loaded) as gw:
        assert gw.db is not None

        async def answered() -> list[Any]:
            assert gw.db is not None
            return await gw.db.read(
                lambda c: c.execute("SELECT chat_id, text FROM outbox").fetchall()
            )

        await wait_until(answered)
        replies = await answered()
        left = await gw.db.read(lambda c: c.execute("SELECT id FROM dead_letters").fetchall())
    assert [tuple(r) for r in replies] == [("cli-chat", "echo: kept aside")]
    assert left == []
