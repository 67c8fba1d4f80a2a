"""Crash and shutdown with a real `picobot gateway` process (DESIGN §4: 1, 2, 9)."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

import pytest
import websockets

from storage.sqlite.db import Database
from tests.fakes.openai_server import FakeOpenAI
from tests.support import GatewayProcess, child_env, conversation, spawn_gateway

pytestmark = pytest.mark.slow


def _config(llm: FakeOpenAI, **gateway: Any) -> dict[str, Any]:
    return {
        "providers": {
            "default": {"base_url": llm.base_url, "api_key": "test-key", "max_retries": 0}
        },
        "models": {"default": {"model_id": "fake-model"}},
        "gateway": {"port": 0, "shutdown_timeout_secs": 10, **gateway},
        "logging": {"format": "json"},
    }


class Client:
    def __init__(self, ws: websockets.ClientConnection, chat_id: str) -> None:
        self.ws = ws
        self.chat_id = chat_id
        self.replies: list[dict[str, Any]] = []

    @classmethod
    async def connect(cls, gw: GatewayProcess, chat_id: str) -> Client:
        ws = await websockets.connect(gw.ws_url)
        await ws.send(json.dumps({"type": "hello", "chat_id": chat_id}))
        assert json.loads(await ws.recv())["type"] == "welcome"
        return cls(ws, chat_id)

    async def send(self, msg_id: str, text: str) -> None:
        await self.ws.send(json.dumps({"type": "message", "id": msg_id, "text": text}))
        while True:
            frame = json.loads(await asyncio.wait_for(self.ws.recv(), 10))
            if frame["type"] == "ack":
                assert frame == {"type": "ack", "id": msg_id, "status": "accepted"}
                return

    async def collect(
        self, until_replies: int, timeout: float, linger: float = 0.0
    ) -> list[dict[str, Any]]:
        """Message frames until `until_replies` arrived (plus `linger` s for extras)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        lingering_until: float | None = None
        while True:
            if len(self.replies) >= until_replies and lingering_until is None:
                lingering_until = loop.time() + linger
            end = lingering_until if lingering_until is not None else deadline
            try:
                raw = await asyncio.wait_for(self.ws.recv(), max(0.01, end - loop.time()))
            except (TimeoutError, websockets.ConnectionClosed):
                return self.replies
            frame = json.loads(raw)
            if frame["type"] == "message":
                self.replies.append(frame)


async def _kill_restart_and_collect(
    gw: GatewayProcess,
    clients: list[Client],
    config: dict[str, Any],
    home: Path,
    env: dict[str, str],
) -> tuple[GatewayProcess, list[list[dict[str, Any]]]]:
    """SIGKILL `gw` (no clean-up at all), start a gateway again on the same home,
    reconnect every client's chat and collect one reply each (and any extras),
    then stop it cleanly."""
    assert await gw.stop(signal.SIGKILL) == -signal.SIGKILL
    for c in clients:
        await c.ws.close()
    gw2 = await spawn_gateway(config, home, env)
    again: list[Client] = []
    try:
        again = [await Client.connect(gw2, c.chat_id) for c in clients]
        results = await asyncio.gather(*(c.collect(1, timeout=40, linger=0.5) for c in again))
    finally:
        for c in again:
            await c.ws.close()
        assert await gw2.stop() == 0
    return gw2, list(results)


async def test_sigkill_mid_flight_then_restart_answers_each_message_once(
    home: Path, llm: FakeOpenAI
) -> None:
    llm.delay = 2.0
    env = child_env(home)
    config = _config(llm)
    gw = await spawn_gateway(config, home, env)
    clients = [await Client.connect(gw, f"crash-{i}") for i in range(20)]
    await asyncio.gather(*(c.send(f"q{i}", f"question {i}") for i, c in enumerate(clients)))
    await llm.wait_requests(20, timeout=30)  # every turn is waiting on the LLM
    gw2, results = await _kill_restart_and_collect(gw, clients, config, home, env)
    for i, replies in enumerate(results):
        assert [(r["reply_to"], r["text"]) for r in replies] == [(f"q{i}", f"echo: question {i}")]
    assert gw2.events("inbox_recovered")[0]["rows"] == 20

    async with Database(home / "storage" / "sessions.db") as db:
        per_inbox = await db.read(
            lambda c: c.execute(
                "SELECT i.platform_id, i.state, COUNT(o.id) FROM inbox i "
                "LEFT JOIN outbox o ON o.inbox_id = i.id GROUP BY i.id"
            ).fetchall()
        )
        assistants = await db.read(
            lambda c: c.execute(
                "SELECT session_id, COUNT(*) FROM messages WHERE role = 'assistant' GROUP BY session_id"
            ).fetchall()
        )
        users = await db.read(
            lambda c: c.execute("SELECT COUNT(*) FROM messages WHERE role = 'user'").fetchone()[0]
        )
    assert len(per_inbox) == 20
    assert all(state == "done" and n == 1 for _, state, n in per_inbox)
    assert len(assistants) == 20
    assert all(n == 1 for _, n in assistants)
    assert users == 20  # the recovered turns did not store the question twice


async def test_sigkill_during_turns_opened_from_the_cache_then_restart_answers_once(
    home: Path, llm: FakeOpenAI
) -> None:
    """Second messages open from the cached history, so nothing of their turn is
    stored until it finishes; killed meanwhile, they are answered once after
    the restart and the transcript holds each question once."""
    env = child_env(home)
    config = _config(llm)
    gw = await spawn_gateway(config, home, env)
    clients = [await Client.connect(gw, f"cached-{i}") for i in range(10)]
    await asyncio.gather(*(c.send(f"a{i}", f"first {i}") for i, c in enumerate(clients)))
    await asyncio.gather(*(c.collect(1, timeout=20) for c in clients))
    llm.delay = 2.0
    await asyncio.gather(*(c.send(f"b{i}", f"second {i}") for i, c in enumerate(clients)))
    await llm.wait_requests(20, timeout=30)
    gw2, results = await _kill_restart_and_collect(gw, clients, config, home, env)
    for i, replies in enumerate(results):
        assert [(r["reply_to"], r["text"]) for r in replies] == [(f"b{i}", f"echo: second {i}")]
    assert gw2.events("inbox_recovered")[0]["rows"] == 10

    async with Database(home / "storage" / "sessions.db") as db:
        transcripts = await db.read(
            lambda c: c.execute(
                "SELECT session_id, group_concat(role || ':' || content, '|') FROM "
                "(SELECT * FROM messages WHERE role != 'system' ORDER BY seq) GROUP BY session_id"
            ).fetchall()
        )
        unfinished = await db.read(
            lambda c: c.execute("SELECT COUNT(*) FROM inbox WHERE state != 'done'").fetchone()[0]
        )
    assert sorted(tuple(r) for r in transcripts) == sorted(
        (
            f"cached-{i}",
            f"user:first {i}|assistant:echo: first {i}|user:second {i}|assistant:echo: second {i}",
        )
        for i in range(10)
    )
    assert unfinished == 0


async def test_sigterm_finishes_turns_flushes_and_exits_zero(home: Path, llm: FakeOpenAI) -> None:
    llm.delay = 1.0
    gw = await spawn_gateway(_config(llm), home, child_env(home))
    clients = [await Client.connect(gw, f"term-{i}") for i in range(5)]
    await asyncio.gather(*(c.send("m1", f"hello {i}") for i, c in enumerate(clients)))
    await llm.wait_requests(5, timeout=20)
    gw.proc.send_signal(signal.SIGTERM)
    results = await asyncio.gather(*(c.collect(1, timeout=30) for c in clients))
    assert await gw.stop(sig=None) == 0
    for c in clients:
        await c.ws.close()
    for i, replies in enumerate(results):
        assert [r["text"] for r in replies] == [f"echo: hello {i}"]
    assert gw.events("gateway_stopped")
    assert not gw.events("shutdown_outbox_not_flushed")


async def test_second_signal_exits_at_once_and_nothing_is_lost(home: Path, llm: FakeOpenAI) -> None:
    llm.hold()
    env = child_env(home)
    config = _config(llm)
    gw = await spawn_gateway(config, home, env)
    client = await Client.connect(gw, "impatient")
    await client.send("m1", "are you still there?")
    await llm.wait_requests(1, timeout=20)
    gw.proc.send_signal(signal.SIGTERM)
    await gw.wait_event("gateway_stopping", timeout=20)  # the turn is still held at the LLM
    gw.proc.send_signal(signal.SIGTERM)
    assert await gw.stop(sig=None, timeout=15) == 130  # far less than the 10 s grace + flush
    await client.ws.close()
    llm.release()

    gw2 = await spawn_gateway(config, home, env)
    client = await Client.connect(gw2, "impatient")
    try:
        replies = await client.collect(1, timeout=30, linger=0.3)
    finally:
        await client.ws.close()
        assert await gw2.stop() == 0
    assert [(r["reply_to"], r["text"]) for r in replies] == [("m1", "echo: are you still there?")]


async def test_telegram_gateway_killed_after_a_batch_answers_each_update_once(
    home: Path, llm: FakeOpenAI
) -> None:
    from tests.fakes.telegram_server import FakeTelegram

    llm.delay = 2.0
    async with FakeTelegram() as tg:
        config = _config(llm)
        config["channels"] = {"websocket": {"enabled": False}, "telegram": tg.settings()}
        config["gateway"]["outbound_retry_base_secs"] = 0.05
        env = child_env(home)
        for n, text in enumerate(("one", "two", "three"), 1):  # three chats: three turns at once
            await tg.add_message(text, chat_id=100 + n, user_id=100 + n)
        gw = await spawn_gateway(config, home, env)
        await llm.wait_requests(3, timeout=30)  # the whole batch is recorded and in flight
        assert await gw.stop(signal.SIGKILL) == -signal.SIGKILL
        assert tg.sent_texts == []

        gw2 = await spawn_gateway(config, home, env)
        try:
            await tg.wait_for(lambda: len(tg.sent_texts) >= 3, timeout=40)
            await tg.add_message(
                "four", chat_id=101, user_id=101
            )  # polling goes on from the offset
            await tg.wait_for(lambda: len(tg.sent_texts) >= 4, timeout=20)
        finally:
            assert await gw2.stop() == 0
        assert sorted(tg.sent_texts) == sorted(
            f"echo: {t}" for t in ("one", "two", "three", "four")
        )
        assert tg.pending == []


async def _wait_for_row(db_path: Path, sql: str, timeout: float = 20.0) -> None:
    """Until `sql` finds a row in the other process's database (it has no
    event to await: the row is all there is)."""
    async with asyncio.timeout(timeout), Database(db_path) as db:
        while not await db.read(lambda c: c.execute(sql).fetchall()):
            await asyncio.sleep(0.05)


async def test_sigkill_before_a_scheduled_turn_starts_replays_its_request_once(
    home: Path, llm: FakeOpenAI
) -> None:
    """The job's inbox row is recorded but its turn waits for the only run slot
    when the process is killed; after the restart the same typed request runs:
    agent `other`, its system prompt, the reply in the job's target chat, once."""
    job = {
        "id": "by.other",
        "kind": "agent_task",
        "schedule": {"type": "delay", "seconds": 3},
        "target": {"channel": "websocket", "chat_id": "team"},
        "payload": {"prompt": "Scheduled question", "agent": "other", "system_prompt": "Be terse."},
    }
    config = _config(llm, max_concurrent_runs=1)
    config["models"]["big"] = {"model_id": "other-model"}
    config["agents"] = {"default": {}, "other": {"model": "big"}}
    config["scheduler"] = {"enabled": True, "tick_resolution_ms": 10, "jobs": [job]}
    env = child_env(home)
    llm.delay = 60.0  # the hog's turn holds the only slot until the kill
    gw = await spawn_gateway(config, home, env)
    hog = await Client.connect(gw, "hog")
    await hog.send("h1", "hold the slot")
    await llm.wait_requests(1, timeout=20)
    db_path = home / "storage" / "sessions.db"
    await _wait_for_row(
        db_path, "SELECT id FROM inbox WHERE platform_id LIKE 'scheduler:%' AND state = 'received'"
    )
    team = await Client.connect(gw, "team")
    assert [conversation(r)[-1]["content"] for r in llm.requests] == ["hold the slot"]
    llm.delay = 0.0  # for the requests after the restart  # the chat the job's reply goes to
    gw2, results = await _kill_restart_and_collect(gw, [hog, team], config, home, env)
    assert [r["text"] for r in results[0]] == ["echo: hold the slot"]
    assert [r["text"] for r in results[1]] == ["echo: Scheduled question"]
    asked = [r for r in llm.requests if conversation(r)[-1]["content"] == "Scheduled question"]
    assert len(asked) == 1
    assert asked[0]["model"] == "other-model"
    assert {"role": "system", "content": "Be terse."} in asked[0]["messages"]
    assert gw2.events("scheduler_runs_interrupted_by_restart")[0]["count"] == 1

    async with Database(db_path) as db:
        rows = await db.read(
            lambda c: c.execute(
                "SELECT i.state, COUNT(o.id), "
                "(SELECT COUNT(*) FROM messages m WHERE m.content = 'Scheduled question') "
                "FROM inbox i LEFT JOIN outbox o ON o.inbox_id = i.id "
                "WHERE i.platform_id LIKE 'scheduler:%' GROUP BY i.id"
            ).fetchall()
        )
        runs = await db.read(
            lambda c: c.execute("SELECT status FROM job_runs WHERE job_id = 'by.other'").fetchall()
        )
    assert [tuple(r) for r in rows] == [("done", 1, 1)]
    assert [r[0] for r in runs] == ["interrupted"]  # at most one execution per fire time


async def test_sigkill_during_an_outage_then_restart_after_it_delivers_every_reply_once(
    home: Path, llm: FakeOpenAI
) -> None:
    """Telegram refuses every sendMessage (502); the gateway is killed with the
    replies waiting and started again once Telegram is back: each reply goes
    out once, in order per chat, and the outage cost one warning line."""
    from tests.fakes.telegram_server import FakeTelegram

    db_path = home / "storage" / "sessions.db"
    async with FakeTelegram() as tg:
        config = _config(llm, outbound_retry_base_secs=0.05, outbound_retry_max_secs=0.3)
        config["channels"] = {"websocket": {"enabled": False}, "telegram": tg.settings()}
        env = child_env(home)
        tg.start_outage("sendMessage")
        gw = await spawn_gateway(config, home, env)
        chats = [(42, "one"), (42, "two"), (42, "three"), (43, "elsewhere")]
        for n, (chat_id, text) in enumerate(chats, 1):
            await tg.add_message(text, chat_id=chat_id, user_id=chat_id)
            await _wait_for_row(db_path, f"SELECT id FROM outbox LIMIT 1 OFFSET {n - 1}")
        await gw.wait_event("outbound_channel_degraded", timeout=20)
        await tg.wait_for(lambda: len(tg.refused("sendMessage")) >= 12, timeout=30)
        assert await gw.stop(signal.SIGKILL) == -signal.SIGKILL
        assert tg.sent_texts == []

        tg.end_outage()
        gw2 = await spawn_gateway(config, home, env)
        try:
            await tg.wait_for(lambda: len(tg.sent_texts) >= 4, timeout=30)
        finally:
            assert await gw2.stop() == 0
        delivered = [
            (c.params["chat_id"], c.params["_visible"])
            for c in tg.calls_of("sendMessage")
            if c.params.get("_ok")
        ]
    assert [t for chat, t in delivered if chat == "42"] == ["echo: one", "echo: two", "echo: three"]
    assert [t for chat, t in delivered if chat == "43"] == ["echo: elsewhere"]
    assert len(delivered) == 4
    assert len(llm.requests) == 4  # the turns were not run again
    # every logger, the libraries' too: one line above info for the whole outage
    loud = [line["event"] for line in gw.lines if line.get("level") in ("warning", "error")]
    assert loud == ["outbound_channel_degraded"]
    async with Database(db_path) as db:
        states = await db.read(
            lambda c: c.execute("SELECT state, COUNT(*) FROM outbox GROUP BY state").fetchall()
        )
    assert [tuple(r) for r in states] == [("sent", 4)]
