"""`picobot storage copy` of a lived-in SQLite home to PostgreSQL (issue 53),
then a gateway on PostgreSQL carries on: the old chat with its history, the
parked reply delivered once, the job listed, the memory found."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import websockets

from storage.backends import open_database
from tests.fakes.openai_server import FakeOpenAI
from tests.support import (
    WsClient,
    child_env,
    conversation,
    process_config,
    run_picobot,
    spawn_gateway,
    wait_until,
)

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

FACT = "prefers answers in Esperanto QZX-9"
PUT = {"action": "put", "namespace": "preferences", "memory_key": "language", "content": FACT}
GET = {"action": "get", "namespace": "preferences", "memory_key": "language"}
JOB = {
    "id": "morning.digest",
    "kind": "agent_task",
    "schedule": {"type": "cron", "expression": "0 9 * * *"},
    "payload": {"prompt": "summarise the news"},
}


async def _connect(url: str, chat_id: str) -> tuple[websockets.ClientConnection, WsClient]:
    ws = await websockets.connect(url)
    await ws.send(json.dumps({"type": "hello", "protocol": 1, "chat_id": chat_id}))
    assert json.loads(await ws.recv())["type"] == "welcome"
    return ws, WsClient(ws, chat_id)


async def _rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    db = open_database(url)
    await db.open()
    try:
        return await db.read(lambda c: [tuple(r) for r in c.execute(sql).fetchall()])
    finally:
        await db.close()


async def _live_on_sqlite(llm: FakeOpenAI, home: Path, config: dict[str, Any]) -> str:
    """A conversation, a memory, a job, and a reply parked for a client that
    left; returns the parked reply's client message id."""
    gw = await spawn_gateway(config, home, child_env(home))
    try:
        ws, old = await _connect(gw.ws_url, "old-chat")
        async with ws:
            assert await old.ask("my name is Zamenhof") == "echo: my name is Zamenhof"
            llm.add_tool_call("memory_manage", PUT)
            llm.add_text("noted")
            assert await old.ask("remember my language") == "noted"
            llm.add_tool_call("scheduler_manage", {"action": "put", "job": JOB})
            llm.add_text("scheduled")
            assert await old.ask("every morning, the news") == "scheduled"
            tool_answers = [m for m in conversation(llm.requests[-1]) if m["role"] == "tool"]
            assert json.loads(tool_answers[-1]["content"])["ok"] is True, tool_answers

        llm.hold()
        ws, away = await _connect(gw.ws_url, "away-chat")
        async with ws:
            msg_id = await away.send("answer me later")
            assert (await away.recv_type("ack"))["status"] == "accepted"
            await llm.wait_requests(len(llm.requests) + 1, timeout=20)
        llm.release()  # the reply is written with nobody connected: parked
        db_url = f"sqlite:///{home / 'storage' / 'sessions.db'}"
        parked = "SELECT id FROM outbox WHERE chat_id = 'away-chat' AND state = 'parked'"
        await wait_until(lambda: _rows(db_url, parked), timeout=20)
    finally:
        assert await gw.stop() == 0
    return msg_id


async def test_a_copied_home_carries_on_on_postgresql(
    home: Path, llm: FakeOpenAI, postgres_url: str
) -> None:
    scheduler = {"enabled": True, "tick_resolution_ms": 10}
    sqlite_config = process_config(llm.base_url, scheduler=scheduler)
    msg_id = await _live_on_sqlite(llm, home, sqlite_config)

    code, out = await run_picobot(
        home, "storage", "copy", "--to", postgres_url, "--config", str(home / "config.json")
    )
    assert code == 0, out
    assert "\ncopied " in out, out
    assert f" to {postgres_url}\n" in out, out
    counted = {  # the built-in memory maintenance job is the second job
        "sessions": 2, "memories": 1, "scheduler_jobs": 2, "inbox": 4, "outbox": 4,
    }  # fmt: skip
    for table, rows in counted.items():
        assert f"\n  {table}: {rows} rows\n" in out, (table, out)

    pg_config = process_config(llm.base_url, scheduler=scheduler, storage={"url": postgres_url})
    gw = await spawn_gateway(pg_config, home, child_env(home))
    try:
        for attempt in range(2):  # the parked reply comes on the first reconnect only
            ws, away = await _connect(gw.ws_url, "away-chat")
            async with ws:
                if attempt == 0:
                    reply = await away.recv_type("message", timeout=20)
                    assert (reply["reply_to"], reply["text"]) == (msg_id, "echo: answer me later")
                with pytest.raises(TimeoutError):
                    await away.recv_type("message", timeout=0.5)

        ws, old = await _connect(gw.ws_url, "old-chat")
        async with ws:
            assert await old.ask("what is my name?") == "echo: what is my name?"
            history = [m["content"] for m in conversation(llm.requests[-1])]
            assert history[0] == "my name is Zamenhof", history
            llm.add_tool_call("memory_search", GET)
            llm.add_text("found")
            assert await old.ask("which language?") == "found"
            tool_answers = [m for m in conversation(llm.requests[-1]) if m["role"] == "tool"]
            assert json.loads(tool_answers[-1]["content"])["content"] == FACT

        pg_config_file = home / "config.json"  # spawn_gateway wrote pg_config there
        code, listed = await run_picobot(home, "jobs", "list", "--config", str(pg_config_file))
        assert code == 0, listed
        assert "morning.digest" in listed, listed
    finally:
        assert await gw.stop() == 0

    away_rows = await _rows(
        postgres_url,
        "SELECT state, COUNT(*) FROM outbox WHERE chat_id = 'away-chat' GROUP BY state",
    )
    assert away_rows == [("sent", 1)]
